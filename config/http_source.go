package config

// httpSourcePace checks the timeouts and limits of the http source at path
// (sluice's additions): each one given is above zero.
func (c *checker) httpSourcePace(path string, h *HTTPSource) {
	for _, d := range []struct {
		name string
		d    *Duration
	}{{"readHeaderTimeout", h.ReadHeaderTimeout}, {"readBodyTimeout", h.ReadBodyTimeout}, {"idleTimeout", h.IdleTimeout}} {
		if d.d != nil && d.d.Duration <= 0 {
			c.add(path+"."+d.name, "(%v) must be positive", d.d.Duration)
		}
	}
	if n := h.MinBodyBytesPerSecond; n != nil && *n == 0 {
		c.add(path+".minBodyBytesPerSecond", "(0) must be at least 1 (bytes a second)")
	}
	if n := h.MaxConnections; n != nil && *n == 0 {
		c.add(path+".maxConnections", "(0) must be at least 1")
	}
}

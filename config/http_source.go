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

// httpSourcePorts checks the ports of the http source at path: each from 1
// to 65535, and plain HTTP's not HTTPS's (8443 when ports.https is not set).
func (c *checker) httpSourcePorts(path string, h *HTTPSource) {
	if h.Ports == nil {
		return
	}
	c.port(path+".ports.http", h.Ports.HTTP)
	c.port(path+".ports.https", h.Ports.HTTPS)
	if h.Ports.HTTP == nil {
		return
	}
	https, of := int32(DefaultHTTPSPort), "the default port of ports.https"
	if h.Ports.HTTPS != nil {
		https, of = *h.Ports.HTTPS, "ports.https"
	}
	if *h.Ports.HTTP == https {
		c.add(path+".ports.http", "(%d) is %s too: plain HTTP needs a port of its own", *h.Ports.HTTP, of)
	}
}

// httpSourceTLS checks the tls block of the http source at path: a
// certificate and its key, each a well-formed secret.
func (c *checker) httpSourceTLS(path string, t *HTTPSourceTLS) {
	if t == nil {
		return
	}
	switch {
	case t.CertSecret == nil && t.KeySecret == nil:
		c.add(path, "needs certSecret and keySecret (leave tls out for a self-signed certificate)")
	case t.CertSecret == nil:
		c.add(path+".certSecret", "is required with keySecret")
	case t.KeySecret == nil:
		c.add(path+".keySecret", "is required with certSecret")
	}
	if t.CertSecret != nil {
		c.secret(path+".certSecret", t.CertSecret)
	}
	if t.KeySecret != nil {
		c.secret(path+".keySecret", t.KeySecret)
	}
}

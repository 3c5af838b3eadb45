package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// MaxPort is the largest TCP port.
const MaxPort = 65535

// ErrPortRange is matched by the error of a port number above [MaxPort].
var ErrPortRange = errors.New("out of range")

// ParsePort parses the port of a host:port address or of a URL: a number
// from 0 to [MaxPort]. A number above MaxPort gives an error matching
// [ErrPortRange]. A port to dial must also not be 0; a port to listen on may
// be, for any free port.
func ParsePort(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Err == strconv.ErrRange, err == nil && n > MaxPort:
		return 0, fmt.Errorf("port %s is %w (at most %d)", s, ErrPortRange, MaxPort)
	case err != nil:
		return 0, fmt.Errorf("port %q is not a number", s)
	}
	return int(n), nil
}

// dialPort checks the port of an address to dial: 1 to MaxPort, or, when
// optional, no port at all (the protocol's default).
func dialPort(port string, optional bool) error {
	if port == "" && optional {
		return nil
	}
	n, err := ParsePort(port)
	switch {
	case errors.Is(err, ErrPortRange) || (err == nil && n == 0):
		return fmt.Errorf("port %s is %w: a port to connect to is 1 to %d", port, ErrPortRange, MaxPort)
	case err != nil:
		return fmt.Errorf("%w: a port to connect to is 1 to %d", err, MaxPort)
	}
	return nil
}

// hostPort checks an address to dial, host:port, at path: a port is
// required.
func (c *checker) hostPort(path, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		c.add(path, "(%q) must be host:port", addr)
		return
	}
	if err := dialPort(port, false); err != nil {
		c.add(path, "(%q): %v", addr, err)
	}
}

// urlPort checks the port of a URL to dial, u, parsed from raw, at path: it
// may be left out, for the scheme's default. It reports whether the port is
// good.
func (c *checker) urlPort(path, raw string, u *url.URL) bool {
	if err := dialPort(u.Port(), true); err != nil {
		c.add(path, "(%q): %v", raw, err)
		return false
	}
	return true
}

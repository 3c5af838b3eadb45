package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respError is an error reply ("-ERR ...") from the server.
type respError string

func (e respError) Error() string { return string(e) }

// probeConn is a minimal RESP2 connection used by the helper itself for
// readiness checks and polling, so that those do not depend on the client
// library's pooling, retries and logging.
type probeConn struct {
	c    net.Conn
	r    *bufio.Reader
	stop func() bool
}

// dialProbe connects (and authenticates if pass is set). Cancelling ctx
// aborts the dial and closes the connection.
func dialProbe(ctx context.Context, addr string, tc *tls.Config, user, pass string, timeout time.Duration) (*probeConn, error) {
	d := &net.Dialer{Timeout: timeout}
	var (
		c   net.Conn
		err error
	)
	if tc != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	p := &probeConn{c: c, r: bufio.NewReader(c), stop: context.AfterFunc(ctx, func() { c.Close() })}
	if pass != "" {
		args := []string{"AUTH"}
		if user != "" {
			args = append(args, user)
		}
		if _, err := p.do(timeout, append(args, pass)...); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

func (p *probeConn) Close() error {
	p.stop()
	return p.c.Close()
}

func (p *probeConn) do(timeout time.Duration, args ...string) (any, error) {
	if err := p.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(p.c, b.String()); err != nil {
		return nil, err
	}
	v, err := p.read()
	if err != nil {
		return nil, err
	}
	if e, ok := v.(respError); ok {
		return nil, e
	}
	return v, nil
}

// read returns string, int64, []any, nil or respError (as a value).
func (p *probeConn) read() (any, error) {
	line, err := p.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty RESP line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return respError(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(p.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = p.read(); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected RESP reply %q", line)
}

// pairs turns a flat [k1 v1 k2 v2 ...] reply into a map.
func pairs(v any) map[string]string {
	m := map[string]string{}
	arr, _ := v.([]any)
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		switch x := arr[i+1].(type) {
		case string:
			m[k] = x
		case int64:
			m[k] = strconv.FormatInt(x, 10)
		}
	}
	return m
}

// infoField returns the value of "field:value" in an INFO reply.
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

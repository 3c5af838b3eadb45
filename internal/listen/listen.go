// Package listen binds the addresses vertex run and vertex processor listen
// on before anything starts, so that an address that cannot be bound is one
// usage error naming its flag or field.
package listen

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// Listeners are the addresses vertex run and vertex processor listen on,
// bound before anything starts, so that an address that cannot be bound (a
// port out of range, a port in use) is one usage error naming its flag or
// field: --metrics-addr, and the addresses of each http source the process
// runs, HTTPS's and plain HTTP's. The vertices take theirs with
// [Listeners.Listen]; [Listeners.Close] closes what nobody took. It is safe
// for concurrent use.
type Listeners struct {
	mu      sync.Mutex
	metrics net.Listener            // nil without --metrics-addr
	http    map[string]net.Listener // by address, until an http source takes it
}

// Flags are what the listeners of a process depend on beside its config:
// the flags of vertex run (or vertex processor) that give addresses, and
// those that say which vertices the process runs.
type Flags struct {
	MetricsAddr, HTTPAddr, PlainHTTPAddr string
	// Vertex is the vertex of --vertex, "" for every vertex.
	Vertex            string
	SideInputsManager bool
}

// httpListen is one address of an http source and where it comes from.
type httpListen struct {
	vertex, path string // the vertex, "" for a MonoVertex, and its source's path
	addr         string
	// flag is the flag that gave addr, "" when it comes from port, the
	// source's field (ports.https or ports.http) at path, nil for the
	// default port of ports.https.
	flag  string
	field string
	port  *int32
}

// Bind binds --metrics-addr and the addresses of every http source that the
// process running f with fl runs.
func Bind(fl Flags, f *config.File) (_ *Listeners, err error) {
	l := &Listeners{http: map[string]net.Listener{}}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if fl.MetricsAddr != "" {
		if l.metrics, err = TCP(fl.MetricsAddr); err != nil {
			return nil, cli.Usagef("--metrics-addr (%q): %v", fl.MetricsAddr, err)
		}
	}
	sources := httpSources(fl, f)
	if err := checkHTTPFlags(fl, f, sources); err != nil {
		return nil, err
	}
	byAddr := map[string]httpListen{}
	for _, s := range sources {
		first, dup := byAddr[s.addr]
		if dup && anyPort(s.addr) {
			continue // each listens on a free port of its own
		}
		if dup {
			return nil, dupAddrError(first, s)
		}
		byAddr[s.addr] = s
		ln, err := TCP(s.addr)
		if err != nil {
			return nil, sourceAddrError(s, err)
		}
		l.http[s.addr] = ln
	}
	return l, nil
}

// checkHTTPFlags checks that --http-addr and --http-plain-addr have an
// address of an http source to set: any http source for --http-addr, one
// with ports.http for --http-plain-addr.
func checkHTTPFlags(fl Flags, f *config.File, sources []httpListen) error {
	has := func(flag string) bool {
		return slices.ContainsFunc(sources, func(s httpListen) bool { return s.flag == flag })
	}
	switch {
	case fl.HTTPAddr != "" && !has("--http-addr"):
		return cli.Usagef("--http-addr (%q): %s", fl.HTTPAddr, noHTTPSource(fl, f))
	case fl.PlainHTTPAddr != "" && !has("--http-plain-addr") && len(sources) == 0:
		return cli.Usagef("--http-plain-addr (%q): %s", fl.PlainHTTPAddr, noHTTPSource(fl, f))
	case fl.PlainHTTPAddr != "" && !has("--http-plain-addr"):
		return cli.Usagef("--http-plain-addr (%q): %s.ports.http is not set: the http source serves HTTPS only; set ports.http to serve plain HTTP besides",
			fl.PlainHTTPAddr, sources[0].path)
	}
	return nil
}

// httpSources lists the addresses of the http sources that the process
// running f with fl runs: a MonoVertex's, the vertex's of --vertex, or every
// vertex's, each HTTPS's and, with ports.http, plain HTTP's.
func httpSources(fl Flags, f *config.File) []httpListen {
	var out []httpListen
	add := func(vertex, path string, s *config.Source) {
		if s == nil || s.HTTP == nil {
			return
		}
		h, path := s.HTTP, path+".http"
		https := httpListen{vertex: vertex, path: path, addr: vertexconfig.HTTPAddr(fl.HTTPAddr, h), field: "ports.https"}
		switch {
		case fl.HTTPAddr != "":
			https.flag = "--http-addr"
		case h.Ports != nil:
			https.port = h.Ports.HTTPS
		}
		out = append(out, https)
		if addr := vertexconfig.PlainHTTPAddr(fl.PlainHTTPAddr, h); addr != "" {
			plain := httpListen{vertex: vertex, path: path, addr: addr, field: "ports.http", port: h.Ports.HTTP}
			if fl.PlainHTTPAddr != "" {
				plain.flag = "--http-plain-addr"
			}
			out = append(out, plain)
		}
	}
	switch {
	case f.MonoVertex != nil:
		add("", "spec.source", f.MonoVertex.Spec.Source)
	case fl.SideInputsManager:
	default:
		for i, v := range f.Pipeline.Spec.Vertices {
			if fl.Vertex == "" || fl.Vertex == v.Name {
				add(v.Name, fmt.Sprintf("spec.vertices[%d].source", i), v.Source)
			}
		}
	}
	return out
}

// noHTTPSource says that what the process runs has no http source.
func noHTTPSource(fl Flags, f *config.File) string {
	switch {
	case f.MonoVertex != nil:
		return fmt.Sprintf("MonoVertex %q has no http source", f.Name())
	case fl.SideInputsManager:
		return "--side-inputs-manager runs no vertex"
	case fl.Vertex != "":
		return fmt.Sprintf("vertex %q of pipeline %q has no http source", fl.Vertex, f.Name())
	}
	return fmt.Sprintf("pipeline %q has no http source", f.Name())
}

// dupAddrError is the usage error of a second http address, s, on the
// address of first: one process cannot listen on one address twice.
func dupAddrError(first, s httpListen) error {
	const twice = "one process cannot listen on one address twice"
	if s.flag != "" && s.flag == first.flag {
		return cli.Usagef("%s (%q): vertices %q and %q both have an http source, and %s: "+
			"run each with --vertex, or leave out %s and give each its own %s", s.flag, s.addr, first.vertex, s.vertex, twice, s.flag, s.field)
	}
	what := fmt.Sprintf("vertex %q's http source listens on it too (%s)", first.vertex, first.origin())
	if first.vertex == s.vertex {
		what = fmt.Sprintf("the http source's %s listens on it too", first.origin())
	}
	advice := "give each its own " + s.field
	if s.flag != "" {
		advice = "give " + s.flag + " an address of its own"
	}
	return sourceAddrError(s, fmt.Errorf("%s, and %s: %s", what, twice, advice))
}

// origin names where the address of s comes from: its flag or its field.
func (s httpListen) origin() string {
	switch {
	case s.flag != "":
		return s.flag
	case s.port == nil:
		return s.field + ", by default"
	}
	return s.field
}

// sourceAddrError is the usage error of an http source that cannot listen on
// its address: it names the flag that gave it, or its field, ports.https or
// ports.http, or the default port of ports.https.
func sourceAddrError(s httpListen, err error) error {
	switch {
	case s.flag != "":
		return cli.Usagef("%s (%q): %v", s.flag, s.addr, err)
	case s.port != nil:
		return cli.Usagef("%s.%s (%d): cannot listen on %s: %v", s.path, s.field, *s.port, s.addr, err)
	}
	return cli.Usagef("%s: cannot listen on %s, the default port of ports.https (set ports.https or --http-addr): %v", s.path, s.addr, err)
}

// anyPort reports whether addr asks for any free port: port 0 or none.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && (port == "" || port == "0")
}

// TCP listens on addr, host:port, after checking its port: 0 (any free
// port) to 65535.
func TCP(addr string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("want host:port, such as :2469 or 127.0.0.1:0: %s", ae.Err)
		}
		return nil, err
	}
	if port != "" {
		if _, err := config.ParsePort(port); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// "listen tcp 127.0.0.1:2469: bind: address already in use" says
		// the address already.
		return nil, &bindError{strings.TrimPrefix(err.Error(), "listen tcp "+addr+": "), err}
	}
	return ln, nil
}

// bindError is the error of a bind without the address its caller names,
// and with its cause (syscall.EADDRINUSE, ...) for errors.Is.
type bindError struct {
	msg string
	err error
}

func (e *bindError) Error() string { return e.msg }
func (e *bindError) Unwrap() error { return e.err }

// Metrics hands over the listener of --metrics-addr, nil without one; it is
// handed over once.
func (l *Listeners) Metrics() net.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.metrics
	l.metrics = nil
	return ln
}

// Listen hands over the listener bound to addr, once, and listens on addr
// for any other address: it is the function of pkg/vertex's WithListen.
func (l *Listeners) Listen(addr string) (net.Listener, error) {
	l.mu.Lock()
	ln, ok := l.http[addr]
	delete(l.http, addr)
	l.mu.Unlock()
	if ok {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// Close closes the listeners nobody took; it is safe to call twice.
func (l *Listeners) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.metrics != nil {
		l.metrics.Close()
		l.metrics = nil
	}
	for addr, ln := range l.http {
		ln.Close()
		delete(l.http, addr)
	}
}

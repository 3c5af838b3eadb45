package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// listeners are the addresses vertex run and vertex processor listen on,
// bound before anything starts, so that an address that cannot be bound (a
// port out of range, a port in use) is one usage error naming its flag or
// field: --metrics-addr, and the address of each http source the process
// runs. The vertices take theirs with listen; close closes what nobody took.
type listeners struct {
	mu      sync.Mutex
	metrics net.Listener            // nil without --metrics-addr
	http    map[string]net.Listener // by address, until an http source takes it
}

// httpListen is one http source's address and where it comes from.
type httpListen struct {
	vertex, path string // the vertex, "" for a MonoVertex, and its source's path
	addr         string
	source       *config.HTTPSource
}

// bindListeners binds --metrics-addr and the address of every http source
// that the process running f with fl runs.
func bindListeners(fl runFlags, f *config.File) (_ *listeners, err error) {
	l := &listeners{http: map[string]net.Listener{}}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if fl.metricsAddr != "" {
		if l.metrics, err = bind(fl.metricsAddr); err != nil {
			return nil, usagef("--metrics-addr (%q): %v", fl.metricsAddr, err)
		}
	}
	sources := httpSources(fl, f)
	if fl.httpAddr != "" && len(sources) == 0 {
		return nil, usagef("--http-addr (%q): %s", fl.httpAddr, noHTTPSource(fl, f))
	}
	byAddr := map[string]httpListen{}
	for _, s := range sources {
		first, dup := byAddr[s.addr]
		if dup && anyPort(s.addr) {
			continue // each listens on a free port of its own
		}
		if dup {
			if fl.httpAddr != "" {
				return nil, usagef("--http-addr (%q): vertices %q and %q both have an http source, and one process cannot listen on one address twice: "+
					"run each with --vertex, or leave out --http-addr and give each its own ports.http", fl.httpAddr, first.vertex, s.vertex)
			}
			return nil, sourceAddrError(s, fmt.Errorf("vertex %q's http source listens on it too, and one process cannot listen on one address twice: "+
				"give each its own ports.http", first.vertex))
		}
		byAddr[s.addr] = s
		ln, err := bind(s.addr)
		switch {
		case err == nil:
			l.http[s.addr] = ln
		case fl.httpAddr != "":
			return nil, usagef("--http-addr (%q): %v", fl.httpAddr, err)
		default:
			return nil, sourceAddrError(s, err)
		}
	}
	return l, nil
}

// httpSources lists the http sources that the process running f with fl
// runs: a MonoVertex's, the vertex's of --vertex, or every vertex's.
func httpSources(fl runFlags, f *config.File) []httpListen {
	var out []httpListen
	add := func(vertex, path string, s *config.Source) {
		if s != nil && s.HTTP != nil {
			out = append(out, httpListen{vertex: vertex, path: path + ".http", addr: vertexconfig.HTTPAddr(fl.httpAddr, s.HTTP), source: s.HTTP})
		}
	}
	switch {
	case f.MonoVertex != nil:
		add("", "spec.source", f.MonoVertex.Spec.Source)
	case fl.sideInputsManager:
	default:
		for i, v := range f.Pipeline.Spec.Vertices {
			if fl.vertex == "" || fl.vertex == v.Name {
				add(v.Name, fmt.Sprintf("spec.vertices[%d].source", i), v.Source)
			}
		}
	}
	return out
}

// noHTTPSource says that what the process runs has no http source.
func noHTTPSource(fl runFlags, f *config.File) string {
	switch {
	case f.MonoVertex != nil:
		return fmt.Sprintf("MonoVertex %q has no http source", f.Name())
	case fl.sideInputsManager:
		return "--side-inputs-manager runs no vertex"
	case fl.vertex != "":
		return fmt.Sprintf("vertex %q of pipeline %q has no http source", fl.vertex, f.Name())
	}
	return fmt.Sprintf("pipeline %q has no http source", f.Name())
}

// sourceAddrError is the usage error of an http source that cannot listen on
// its address, without --http-addr: it names its ports.http, or its default
// port.
func sourceAddrError(s httpListen, err error) error {
	if s.source.Ports != nil && s.source.Ports.HTTP != nil {
		return usagef("%s.ports.http (%d): cannot listen on %s: %v", s.path, *s.source.Ports.HTTP, s.addr, err)
	}
	return usagef("%s: cannot listen on %s, the default port (set ports.http or --http-addr): %v", s.path, s.addr, err)
}

// anyPort reports whether addr asks for any free port: port 0 or none.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && (port == "" || port == "0")
}

// bind listens on addr, host:port, after checking its port: 0 (any free
// port) to 65535.
func bind(addr string) (net.Listener, error) {
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
		return nil, errors.New(strings.TrimPrefix(err.Error(), "listen tcp "+addr+": "))
	}
	return ln, nil
}

// metricsListener hands over the listener of --metrics-addr, nil without
// one; it is handed over once.
func (l *listeners) metricsListener() net.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.metrics
	l.metrics = nil
	return ln
}

// listen hands over the listener bound to addr, once, and listens on addr
// for any other address.
func (l *listeners) listen(addr string) (net.Listener, error) {
	l.mu.Lock()
	ln, ok := l.http[addr]
	delete(l.http, addr)
	l.mu.Unlock()
	if ok {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// close closes the listeners nobody took.
func (l *listeners) close() {
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

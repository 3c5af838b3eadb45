package source

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// HTTPConfig configures an [HTTP] source.
type HTTPConfig struct {
	// Addr is the listen address, such as ":8443" or "127.0.0.1:0".
	Addr string
	// Listener, when set, is where the source serves instead of Addr: a
	// caller that binds the address early hands it over. The source closes it.
	Listener net.Listener
	// TLS, when set, makes Addr (or Listener) serve HTTPS with it, over
	// HTTP/1.1: its NextProtos are set to http/1.1 only, since the limits on
	// slow clients and connections are those of HTTP/1 connections, and its
	// MinVersion to TLS 1.2 at least. Without it, Addr serves plain HTTP.
	TLS *tls.Config
	// PlainAddr, or PlainListener when set, is a second address, where the
	// source serves plain HTTP besides Addr (Numaflow's ports.http). "" and
	// nil: none. Both addresses take the same messages into the same queue,
	// under the same limits.
	PlainAddr     string
	PlainListener net.Listener
	// Vertex is the vertex name: messages are posted to /vertices/<Vertex>.
	Vertex string
	// Token, when set, is the bearer token every request must carry.
	Token string
	// Queue is how many accepted messages may wait to be read (default
	// DefaultHTTPQueue, the size of Numaflow's queue, whatever the vertex's
	// readBatchSize). When it is full, requests get 429 Too Many Requests
	// with Retry-After.
	Queue int
	// MaxQueueBytes is how many bytes of bodies the source holds at most,
	// from a request's admission until its message is acked (default
	// DefaultHTTPMaxQueueBytes). A request that does not fit gets 429 Too
	// Many Requests with Retry-After.
	MaxQueueBytes int64
	// ReadTimeout is the longest a Read waits for messages.
	ReadTimeout time.Duration
	// RetryAfter tells a client turned away how long to wait (default 1s).
	RetryAfter func() time.Duration
	// RequestTimeout is how long a request waits for its message to be written to
	// the sink before it gets 504 (default 30s). The message may still be written.
	RequestTimeout time.Duration
	// MaxBodyBytes limits a message's size (default DefaultHTTPMaxBodyBytes);
	// a body over it, or over MaxQueueBytes, gets 413.
	MaxBodyBytes int64
	// ReadHeaderTimeout is how long a request's headers may take to arrive
	// (default DefaultHTTPReadHeaderTimeout); a connection whose headers are
	// late is closed without an answer.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout and MinBodyBytesPerSecond are a body's pace (defaults
	// DefaultHTTPReadBodyTimeout and DefaultHTTPMinBodyBytesPerSecond): it
	// must arrive within ReadBodyTimeout plus one second for every
	// MinBodyBytesPerSecond bytes that have arrived. A body that falls
	// behind gets 408 Request Timeout and its connection is closed.
	ReadBodyTimeout       time.Duration
	MinBodyBytesPerSecond int64
	// IdleTimeout is how long a connection kept alive may wait for its next
	// request (default DefaultHTTPIdleTimeout) before it is closed.
	IdleTimeout time.Duration
	// MaxConnections is how many connections the source holds open at most
	// (default DefaultHTTPMaxConnections). At the limit, a new connection
	// closes the one that has waited longest for a request; when every one
	// is busy with a request, it gets 503 Service Unavailable with
	// Retry-After.
	MaxConnections int
	Logger         *zap.Logger
}

// HTTP is a source that takes messages posted over HTTP, one per request:
//
//	POST /vertices/<vertex>
//	X-Numaflow-Id: <id>                (optional)
//	X-Numaflow-Event-Time: <epoch ms>  (optional; default now)
//	X-Numaflow-Keys: k1,k2             (optional)
//	Authorization: Bearer <token>      (when a token is configured)
//
// It serves HTTPS when HTTPConfig.TLS is set, and plain HTTP besides on
// HTTPConfig.PlainAddr; a plain HTTP request sent to the HTTPS address gets
// 400 Bad Request. Other headers (X-Numaflow-Id among them, as in Numaflow)
// become the message's headers. A request is answered 204 No
// Content once its message has been written to the sink and acked, so that an
// answered request is never lost. GET /health answers 204.
//
// A request whose message is not written within RequestTimeout gets 504
// Gateway Timeout with the message's X-Numaflow-Id: the message stays in
// flight and may still be written. A request that carries the X-Numaflow-Id
// of a message still in flight (a client that retries after a 504) is not a
// second message: its body is dropped and it waits for that message, and is
// answered as that one is. An id posted again after its message was acked is
// a new message.
//
// # Admission
//
// A request is admitted before its body is read, in this order: the vertex
// in its path (404), the bearer token (401), the source not closing (503),
// its headers (400), its Content-Length not over the largest message size
// (413), then room in the queue: fewer than Queue messages waiting to be read,
// and its Content-Length (32 KiB for a chunked body) within what is left of
// MaxQueueBytes. A request without room gets 429 Too Many Requests with
// Retry-After (whole seconds, at least 1, from HTTPConfig.RetryAfter) and its
// body is left unread; a client that sends Expect: 100-continue never sends
// it. (Of a client that also asked to close the connection, a body of up to
// 64 KiB is read and dropped, and one byte of a larger one, so that it reads
// the answer before the connection closes.) An admitted body takes up to 32
// KiB, and more as it arrives, doubling its buffer, and gets 429 when the
// queue has no more for it. Once the whole body has arrived, the message
// takes its place in the queue, or gets 429 if Queue messages wait to be
// read by then: a body being read holds no place. The bytes of a message are
// held until it is acked, so the bodies the source holds — waiting, being
// read, read and in flight — never exceed MaxQueueBytes, and the largest
// message is the smaller of MaxBodyBytes and MaxQueueBytes.
//
// # Slow clients
//
// A client has ReadHeaderTimeout to send its headers, and its body must keep
// to the pace of ReadBodyTimeout and MinBodyBytesPerSecond, or it gets 408
// Request Timeout; a connection kept alive is closed after IdleTimeout
// without a request. At most MaxConnections connections are open. So a
// client that holds connections and sends nothing, or a byte now and then,
// holds no place in the queue, and each of its connections for a bounded
// time.
type HTTP struct {
	cfg     HTTPConfig
	log     *zap.Logger
	srv     *http.Server
	ln      net.Listener // Addr's
	plainLn net.Listener // PlainAddr's, nil without
	maxBody int64        // the largest body taken
	room    queueRoom
	conns   *connLimit
	// handling counts the requests being handled, so that Close returns
	// once every one is answered.
	handling counter

	bodyTimeouts atomic.Uint64
	rejoined     atomic.Uint64

	queue chan *request
	// posted are the requests queued and not yet acked, by id: a request
	// posted again with the same X-Numaflow-Id waits for the first in place
	// of being a second message.
	postedMu sync.Mutex
	posted   map[string]*request
	closed   chan struct{}
	closing  sync.Once
	serving  sync.WaitGroup
}

type request struct {
	msg  isb.Message
	id   string
	held int64         // the bytes the message holds in the queue's room
	done chan struct{} // closed when the message is acked
	ack  sync.Once
}

var _ isb.Reader = (*HTTP)(nil)

// NewHTTP listens on cfg.Addr, or takes cfg.Listener, and on cfg.PlainAddr
// when it is set, and starts serving. It closes the listeners it was given
// when it fails.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultHTTPQueue
	}
	if cfg.MaxQueueBytes <= 0 {
		cfg.MaxQueueBytes = DefaultHTTPMaxQueueBytes
	}
	if cfg.RetryAfter == nil {
		cfg.RetryAfter = func() time.Duration { return time.Second }
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultHTTPMaxBodyBytes
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultHTTPReadHeaderTimeout
	}
	if cfg.ReadBodyTimeout <= 0 {
		cfg.ReadBodyTimeout = DefaultHTTPReadBodyTimeout
	}
	if cfg.MinBodyBytesPerSecond <= 0 {
		cfg.MinBodyBytesPerSecond = DefaultHTTPMinBodyBytesPerSecond
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultHTTPIdleTimeout
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultHTTPMaxConnections
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ln, plainLn, err := httpListeners(cfg)
	if err != nil {
		return nil, err
	}
	h := &HTTP{cfg: cfg, log: cfg.Logger, ln: ln, plainLn: plainLn, maxBody: min(cfg.MaxBodyBytes, cfg.MaxQueueBytes),
		room:  queueRoom{maxCount: cfg.Queue, maxBytes: cfg.MaxQueueBytes},
		conns: &connLimit{max: cfg.MaxConnections},
		queue: make(chan *request, cfg.Queue), closed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /vertices/{vertex}", h.post)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h.srv = &http.Server{Handler: h.pace(mux), ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		ConnState: h.conns.state, ErrorLog: serverLog(h.log)}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		tlsCfg = serverTLS(cfg.TLS)
	}
	h.serve(ln, tlsCfg)
	if plainLn != nil {
		h.serve(plainLn, nil)
	}
	return h, nil
}

// httpListeners returns the listeners of cfg: Listener or one on Addr, and
// PlainListener or one on PlainAddr when it is set. On an error it closes
// those it has.
func httpListeners(cfg HTTPConfig) (ln, plainLn net.Listener, err error) {
	defer func() {
		if err != nil {
			for _, l := range []net.Listener{ln, plainLn, cfg.Listener, cfg.PlainListener} {
				if l != nil {
					l.Close()
				}
			}
		}
	}()
	if ln = cfg.Listener; ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, nil, err
		}
	}
	if plainLn = cfg.PlainListener; plainLn == nil && cfg.PlainAddr != "" {
		if plainLn, err = net.Listen("tcp", cfg.PlainAddr); err != nil {
			return ln, nil, fmt.Errorf("plain HTTP: %w", err)
		}
	}
	return ln, plainLn, nil
}

// serve serves on ln, HTTPS with tlsCfg when it is not nil, until Close.
func (h *HTTP) serve(ln net.Listener, tlsCfg *tls.Config) {
	var l net.Listener = &limitedListener{Listener: ln, l: h.conns, tls: tlsCfg}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	h.serving.Add(1)
	go func() {
		defer h.serving.Done()
		if err := h.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("http source stopped", zap.Stringer("addr", ln.Addr()), zap.Error(err))
		}
	}()
}

// Addr returns the address the source listens on: HTTPS when it has a TLS
// configuration.
func (h *HTTP) Addr() net.Addr { return h.ln.Addr() }

// PlainAddr returns the address the source serves plain HTTP on besides
// Addr, or nil when it has none.
func (h *HTTP) PlainAddr() net.Addr {
	if h.plainLn == nil {
		return nil
	}
	return h.plainLn.Addr()
}

func (h *HTTP) post(w http.ResponseWriter, r *http.Request) {
	if v := r.PathValue("vertex"); v != h.cfg.Vertex {
		http.Error(w, "no vertex "+strconv.Quote(v)+" here; post to /vertices/"+h.cfg.Vertex, http.StatusNotFound)
		return
	}
	if !h.authorized(r) {
		leaveBody(w, r, false)
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
		return
	}
	if h.stopping() {
		leaveBody(w, r, false)
		http.Error(w, "the source is shutting down", http.StatusServiceUnavailable)
		return
	}
	req, err := h.message(r)
	if err != nil {
		h.refuse(w, r, err, false)
		return
	}
	if req.held, err = h.admit(r); err != nil {
		h.refuse(w, r, err, false)
		return
	}
	body, err := h.readBody(r, &req.held)
	if err != nil {
		h.room.free(req.held)
		if errors.Is(err, errSlowBody) {
			h.tooSlow(w, err)
			return
		}
		h.refuse(w, r, err, true)
		return
	}
	req.msg.Value = body
	if h.stopping() {
		h.room.free(req.held)
		http.Error(w, "the source is shutting down", http.StatusServiceUnavailable)
		return
	}
	if first := h.join(req); first != req {
		// The same message, posted again while the first is in flight (a
		// client that retried after a 504): it waits for the first.
		h.room.free(req.held)
		h.rejoined.Add(1)
		h.answer(w, r, first)
		return
	}
	if err := h.room.enqueue(); err != nil {
		h.forget(req)
		h.room.free(req.held)
		h.refuse(w, r, err, true)
		return
	}
	h.queue <- req // never blocks: the room had a place for it
	h.answer(w, r, req)
}

// join returns the request in flight with req's id, or req, then in flight
// itself, when there is none.
func (h *HTTP) join(req *request) *request {
	h.postedMu.Lock()
	defer h.postedMu.Unlock()
	if first, ok := h.posted[req.id]; ok {
		return first
	}
	if h.posted == nil {
		h.posted = map[string]*request{}
	}
	h.posted[req.id] = req
	return req
}

// forget ends what join began for req: its id is no longer in flight.
func (h *HTTP) forget(req *request) {
	h.postedMu.Lock()
	if h.posted[req.id] == req {
		delete(h.posted, req.id)
	}
	h.postedMu.Unlock()
}

// answer waits for req's message to be acked and answers 204, or 504 after
// the request timeout, or 503 when the source closes first.
func (h *HTTP) answer(w http.ResponseWriter, r *http.Request, req *request) {
	t := time.NewTimer(h.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-req.done:
		w.Header().Set("X-Numaflow-Id", req.id)
		w.WriteHeader(http.StatusNoContent)
	case <-t.C:
		w.Header().Set("X-Numaflow-Id", req.id)
		http.Error(w, "accepted but not yet written to the sink; post it again with the same X-Numaflow-Id to wait for it without a second message", http.StatusGatewayTimeout)
	case <-h.closed:
		// Close comes after the forwarder's last ack: unless it was acked just now,
		// this message was not written.
		select {
		case <-req.done:
			w.Header().Set("X-Numaflow-Id", req.id)
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "the source is shutting down", http.StatusServiceUnavailable)
		}
	case <-r.Context().Done():
	}
}

// leaveBody is called before answering a request whose body is left unread.
// A client that keeps its connection open is taken care of by the server,
// which reads and drops a small body and closes the connection after the
// answer on a larger one. A client that asked to close the connection
// (Connection: close) and is sending its body — it did not ask for Expect:
// 100-continue, or the body was being read — would see the connection reset
// in place of the answer. For it, leaveBody reads and drops a body of at
// most dropBytes; of a larger one it reads one byte through
// http.MaxBytesReader with a limit of 0, which tells the server to
// half-close the connection after the answer and close it a moment later,
// once the client has read the answer. Nothing read is kept.
func leaveBody(w http.ResponseWriter, r *http.Request, reading bool) {
	if !r.Close || r.ContentLength == 0 || (!reading && strings.EqualFold(r.Header.Get("Expect"), "100-continue")) {
		return
	}
	if r.ContentLength > 0 && r.ContentLength <= dropBytes {
		io.Copy(io.Discard, r.Body)
		return
	}
	var one [1]byte
	http.MaxBytesReader(w, r.Body, 0).Read(one[:])
}

// dropBytes is the largest body that leaveBody reads and drops.
const dropBytes = 64 << 10

// authorized reports whether r carries the bearer token, when one is needed.
func (h *HTTP) authorized(r *http.Request) bool {
	if h.cfg.Token == "" {
		return true
	}
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(h.cfg.Token)) == 1
}

// stopping reports whether Close has begun.
func (h *HTTP) stopping() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// refuse answers a request turned away by admission, or while its body was
// read (reading): 429 with Retry-After when the queue has no room, 413 for a
// body too large, 400 otherwise.
func (h *HTTP) refuse(w http.ResponseWriter, r *http.Request, err error, reading bool) {
	leaveBody(w, r, reading)
	switch {
	case errors.Is(err, errNoRoom):
		secs := int(math.Ceil(h.cfg.RetryAfter().Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		http.Error(w, "throttled: the vertex takes no more messages now ("+err.Error()+")", http.StatusTooManyRequests)
	case errors.Is(err, errTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
	default:
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// message builds the message of a request from its headers; its body is read
// once the request is admitted.
func (h *HTTP) message(r *http.Request) (*request, error) {
	req := &request{done: make(chan struct{}), id: r.Header.Get("X-Numaflow-Id")}
	if req.id == "" {
		req.id = newID()
	}
	req.msg = isb.Message{ID: req.id, EventTime: time.Now()}
	if et := r.Header.Get("X-Numaflow-Event-Time"); et != "" {
		ms, err := strconv.ParseInt(et, 10, 64)
		if err != nil {
			return nil, errors.New("X-Numaflow-Event-Time must be epoch milliseconds")
		}
		req.msg.EventTime = time.UnixMilli(ms)
	}
	if keys := r.Header.Get("X-Numaflow-Keys"); keys != "" {
		for k := range strings.SplitSeq(keys, ",") {
			req.msg.Keys = append(req.msg.Keys, strings.TrimSpace(k))
		}
	}
	for name, values := range r.Header {
		switch name {
		case "Authorization", "X-Numaflow-Event-Time", "X-Numaflow-Keys", "Content-Length", "User-Agent", "Accept-Encoding":
			continue
		}
		if req.msg.Headers == nil {
			req.msg.Headers = map[string]string{}
		}
		req.msg.Headers[name] = strings.Join(values, ",")
	}
	return req, nil
}

// newID returns a random message id.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Read fills buf with posted messages, waiting up to the read timeout for the
// first.
func (h *HTTP) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	t := time.NewTimer(h.cfg.ReadTimeout)
	defer t.Stop()
	var first *request
	select {
	case first = <-h.queue:
	case <-t.C:
		return 0, nil
	case <-ctx.Done():
		return 0, nil
	}
	n := 0
	defer func() { h.room.read(n) }()
	for req := first; ; {
		buf[n] = isb.ReadMessage{Message: req.msg, Handle: req}
		n++
		if n == len(buf) {
			return n, nil
		}
		select {
		case req = <-h.queue:
		default:
			return n, nil
		}
	}
}

// Ack answers the requests of msgs and gives back the bytes their messages
// held.
func (h *HTTP) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	for i := range msgs {
		if req, ok := msgs[i].Handle.(*request); ok {
			req.ack.Do(func() {
				h.room.free(req.held)
				h.forget(req)
				close(req.done)
			})
		}
	}
	return nil
}

// Held returns how many messages wait to be read and how many bytes of bodies
// the source holds: of the messages waiting, those read and not yet acked,
// and the requests being read.
func (h *HTTP) Held() (messages int, bytes int64) { return h.room.held() }

// Close stops taking requests and answers every request not yet acked 503, so
// that its client sends it again; call it after the forwarder has stopped.
func (h *HTTP) Close() error {
	h.closing.Do(func() { close(h.closed) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Shutdown waits for connections that never sent a request (clients dial
	// ahead) for seconds; once the answers are out, close what is left.
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	h.serving.Wait()
	h.conns.wait(2 * lingerTime)
	h.handling.wait(2 * lingerTime)
	return nil
}

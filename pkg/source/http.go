package source

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// HTTPConfig configures an [HTTP] source.
type HTTPConfig struct {
	// Addr is the listen address, such as ":8090" or "127.0.0.1:0".
	Addr string
	// Vertex is the vertex name: messages are posted to /vertices/<Vertex>.
	Vertex string
	// Token, when set, is the bearer token every request must carry.
	Token string
	// Queue is how many accepted messages may wait to be read (default 500).
	// When it is full, requests get 429 Too Many Requests with Retry-After.
	Queue int
	// ReadTimeout is the longest a Read waits for messages.
	ReadTimeout time.Duration
	// RetryAfter tells a client turned away how long to wait (default 1s).
	RetryAfter func() time.Duration
	// RequestTimeout is how long a request waits for its message to be written to
	// the sink before it gets 504 (default 30s). The message may still be written.
	RequestTimeout time.Duration
	// MaxBodyBytes limits a message's size (default 64 MiB).
	MaxBodyBytes int64
	Logger       *zap.Logger
}

// HTTP is a source that takes messages posted over HTTP, one per request:
//
//	POST /vertices/<vertex>
//	X-Numaflow-Id: <id>                (optional)
//	X-Numaflow-Event-Time: <epoch ms>  (optional; default now)
//	X-Numaflow-Keys: k1,k2             (optional)
//	Authorization: Bearer <token>      (when a token is configured)
//
// Other headers (X-Numaflow-Id among them, as in Numaflow) become the message's
// headers. A request is answered 204 No
// Content once its message has been written to the sink and acked, so that an
// answered request is never lost; a queue full because the vertex is throttled or
// slow answers 429 with Retry-After, so the queue never grows without bound.
// GET /health answers 204.
type HTTP struct {
	cfg HTTPConfig
	log *zap.Logger
	srv *http.Server
	ln  net.Listener

	queue   chan *request
	closed  chan struct{}
	closing sync.Once
	serving sync.WaitGroup
}

type request struct {
	msg  isb.Message
	id   string
	done chan struct{} // closed when the message is acked
	ack  sync.Once
}

var _ isb.Reader = (*HTTP)(nil)

// NewHTTP listens on cfg.Addr and starts serving.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.Queue <= 0 {
		cfg.Queue = 500
	}
	if cfg.RetryAfter == nil {
		cfg.RetryAfter = func() time.Duration { return time.Second }
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	h := &HTTP{cfg: cfg, log: cfg.Logger, ln: ln, queue: make(chan *request, cfg.Queue), closed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /vertices/{vertex}", h.post)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	h.serving.Add(1)
	go func() {
		defer h.serving.Done()
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("http source stopped", zap.Error(err))
		}
	}()
	return h, nil
}

// Addr returns the address the source listens on.
func (h *HTTP) Addr() net.Addr { return h.ln.Addr() }

func (h *HTTP) post(w http.ResponseWriter, r *http.Request) {
	if v := r.PathValue("vertex"); v != h.cfg.Vertex {
		http.Error(w, "no vertex "+strconv.Quote(v)+" here; post to /vertices/"+h.cfg.Vertex, http.StatusNotFound)
		return
	}
	if h.cfg.Token != "" {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(h.cfg.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		code := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "reading the body: "+err.Error(), code)
		return
	}
	req, err := h.message(r, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case <-h.closed:
		http.Error(w, "the source is shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	select {
	case h.queue <- req:
	default:
		secs := int(math.Ceil(h.cfg.RetryAfter().Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		http.Error(w, "throttled: the vertex takes no more messages now", http.StatusTooManyRequests)
		return
	}
	t := time.NewTimer(h.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-req.done:
		w.Header().Set("X-Numaflow-Id", req.id)
		w.WriteHeader(http.StatusNoContent)
	case <-t.C:
		http.Error(w, "accepted but not yet written to the sink", http.StatusGatewayTimeout)
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

// message builds the message of a request from its headers and body.
func (h *HTTP) message(r *http.Request, body []byte) (*request, error) {
	req := &request{done: make(chan struct{}), id: r.Header.Get("X-Numaflow-Id")}
	if req.id == "" {
		req.id = newID()
	}
	req.msg = isb.Message{ID: req.id, Value: body, EventTime: time.Now()}
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

// Ack answers the requests of msgs.
func (h *HTTP) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	for i := range msgs {
		if req, ok := msgs[i].Handle.(*request); ok {
			req.ack.Do(func() { close(req.done) })
		}
	}
	return nil
}

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
	return nil
}

package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// HTTPConfig configures an [HTTP] sink. Only URL is required.
type HTTPConfig struct {
	// URL is the endpoint, an absolute http or https URL.
	URL string
	// Method is the request method (default POST).
	Method string
	// Header holds headers sent with every request; they win over the
	// message's own.
	Header http.Header
	// Batch sends a whole batch in one request, as a JSON array, instead of
	// one request per message.
	Batch bool
	// TLS configures https: the CAs to trust, a client certificate (default:
	// the system's roots, no client certificate).
	TLS *tls.Config
	// Timeout bounds each request, from its start to the end of its answer
	// (default 10s).
	Timeout time.Duration
	// Concurrency is how many requests of a Write may be in flight at once
	// when each message has its own (default 16).
	Concurrency int
	// MaxRetryAfter caps the wait a throttled endpoint may ask for in
	// Retry-After (default 5m).
	MaxRetryAfter time.Duration
	// Logger logs what the answers cannot say, such as an endpoint that
	// redirects (default: no logs).
	Logger *zap.Logger
	// Clock is what a Retry-After given as an HTTP date is measured against
	// (default: the wall clock).
	Clock clock.Clock
}

// The defaults of HTTPConfig.
const (
	DefaultHTTPTimeout       = 10 * time.Second
	DefaultHTTPConcurrency   = 16
	DefaultHTTPMaxRetryAfter = 5 * time.Minute
)

// HTTP is a sink that sends messages to an HTTP endpoint.
//
// Without Batch, each message is a request of its own whose body is the
// payload, with the headers that sluice's http source reads (so that a vertex
// can feed another's http source): X-Numaflow-Id, X-Numaflow-Keys (the keys
// joined by commas) and X-Numaflow-Event-Time (Unix milliseconds); then the
// message's own headers (but for those of the connection, and those three,
// which stay as the message says); then the configured ones, which win. Up to
// Concurrency requests of a Write run at once, fewer after throttled
// answers: the requests in flight have an AIMD limit, shared by the
// Writes, that a 429 or 503 halves (once for the requests sent before it)
// and each answer 2xx raises by 1/limit, back up to Concurrency.
//
// With Batch, a Write is one request with Content-Type: application/json and
// a JSON array of objects {"id", "keys", "eventTime" (RFC 3339 with
// milliseconds, UTC), "headers", "value" (the payload in standard base64)}; its
// answer is every message's.
//
// An answer 2xx is written; 429 and 503 are an [*isb.ThrottledError] with the
// wait Retry-After asks for (seconds or an HTTP date; 0 when absent or
// invalid; at most MaxRetryAfter), and the requests of the Write not yet
// started are not sent but get the same error, so that a throttled endpoint
// is not pressed by the rest of the batch; until that Retry-After has
// passed, a Write sends nothing and its messages get an *isb.ThrottledError
// with the wait left and no Signal (the endpoint was heard once); any
// other 4xx but 408 is an error matching [isb.ErrRejected] with the status and the start of the body; 408,
// other 5xx, redirects (never followed), timeouts and connection errors are
// plain errors, to be retried.
//
// The sink keeps its connections open between Writes and keeps no message
// after Write returns. It is safe for concurrent use.
type HTTP struct {
	cfg      HTTPConfig
	endpoint string // the URL without its password, for errors
	client   *http.Client
	log      *zap.Logger
	redirect sync.Once
	bufs     sync.Pool // of *[]byte, batch bodies
	flight   *inflight // the AIMD limit on requests in flight
}

var _ isb.Writer = (*HTTP)(nil)

// NewHTTP returns an HTTP sink. Its errors name the field at fault: url,
// method, header, timeout, concurrency, maxRetryAfter.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := checkHTTPConfig(&cfg)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(100, cfg.Concurrency),
		MaxIdleConnsPerHost:   cfg.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	h := &HTTP{cfg: cfg, endpoint: u.Redacted(), log: cfg.Logger, flight: newInflight(cfg.Concurrency, cfg.Clock)}
	h.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return h, nil
}

// checkHTTPConfig sets cfg's defaults and checks its fields, and returns the
// parsed URL.
func checkHTTPConfig(cfg *HTTPConfig) (*url.URL, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := cfg.URL
		if err == nil {
			shown = u.Redacted()
		} else if i := strings.LastIndexByte(shown, '@'); i >= 0 {
			shown = "…" + shown[i:] // no credentials in errors
		}
		return nil, fmt.Errorf("http sink: url %q: want an absolute http or https URL", shown)
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodPost
	}
	if !validHeaderName(cfg.Method) {
		return nil, fmt.Errorf("http sink: method %q: not a valid HTTP method", cfg.Method)
	}
	header := make(http.Header, len(cfg.Header))
	for name, values := range cfg.Header {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("http sink: header %q: not a valid header name", name)
		}
		for _, v := range values {
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("http sink: header %q: its value has a control character", name)
			}
		}
		header[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	cfg.Header = header
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{{"timeout", &cfg.Timeout, DefaultHTTPTimeout}, {"maxRetryAfter", &cfg.MaxRetryAfter, DefaultHTTPMaxRetryAfter}} {
		if *d.value < 0 {
			return nil, fmt.Errorf("http sink: %s (%v) must not be negative", d.name, *d.value)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("http sink: concurrency (%d) must not be negative", cfg.Concurrency)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultHTTPConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return u, nil
}

// Write sends msgs, in one request or one per message, and records each
// message's outcome in errs. It returns nil: every failure is a message's.
func (h *HTTP) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	if len(msgs) == 0 {
		return nil
	}
	if h.cfg.Batch {
		err := h.writeBatch(ctx, msgs)
		for i := range msgs {
			errs[i] = err
		}
		return nil
	}
	h.writeEach(ctx, msgs, errs)
	return nil
}

// Close closes the idle connections. It is safe to call twice.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}

// writeEach sends each message in a request of its own, Concurrency at a
// time, until one is throttled: the messages not yet sent then get the same
// error.
func (h *HTTP) writeEach(ctx context.Context, msgs []isb.Message, errs []error) {
	var next atomic.Int64
	var throttled atomic.Pointer[isb.ThrottledError]
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(msgs) {
				return
			}
			if te := throttled.Load(); te != nil {
				errs[i] = te
				continue
			}
			n, err := h.flight.acquire(ctx)
			if err != nil {
				errs[i] = err
				if te, ok := asThrottled(err); ok {
					throttled.CompareAndSwap(nil, te)
				}
				continue
			}
			if te := throttled.Load(); te != nil { // came while waiting for a slot
				h.flight.abandon()
				errs[i] = te
				continue
			}
			errs[i] = h.sendMessage(ctx, &msgs[i])
			h.flight.release(n, errs[i])
			if te, ok := asThrottled(errs[i]); ok {
				throttled.CompareAndSwap(nil, te)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(h.cfg.Concurrency, len(msgs)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// sendMessage sends m in a request of its own.
func (h *HTTP) sendMessage(ctx context.Context, m *isb.Message) error {
	header, err := h.messageHeader(m)
	if err != nil {
		return err
	}
	return h.send(ctx, m.Value, header)
}

// writeBatch sends msgs as a JSON array in one request.
func (h *HTTP) writeBatch(ctx context.Context, msgs []isb.Message) (err error) {
	n, err := h.flight.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { h.flight.release(n, err) }()
	bp, _ := h.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	*bp = appendBatch((*bp)[:0], msgs)
	defer h.bufs.Put(bp)
	header := make(http.Header, len(h.cfg.Header)+1)
	header.Set("Content-Type", "application/json")
	for name, values := range h.cfg.Header {
		header[name] = values
	}
	return h.send(ctx, *bp, header)
}

// send makes one request with body and header, and returns what its answer
// means for the messages in it. The transport may read a body after the
// answer: the body is cut off from it before send returns.
func (h *HTTP) send(ctx context.Context, body []byte, header http.Header) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, h.cfg.Method, h.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("http sink: %w", err)
	}
	req.Header = header
	p := setBody(req, body)
	defer p.detach()
	resp, err := h.client.Do(req)
	if err != nil {
		if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("http sink: %s %s: no answer within %v", h.cfg.Method, h.endpoint, h.cfg.Timeout)
		}
		return fmt.Errorf("http sink: %w", err)
	}
	defer drain(resp.Body)
	return h.outcome(resp)
}

// outcome is what resp means for the messages of its request.
func (h *HTTP) outcome(resp *http.Response) error {
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		signal := isb.SignalHTTP429
		if code == http.StatusServiceUnavailable {
			signal = isb.SignalHTTP503
		}
		return &isb.ThrottledError{RetryAfter: h.retryAfter(resp.Header.Get("Retry-After")), Cause: h.answer(resp), Signal: signal}
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
		return fmt.Errorf("%w: %s", isb.ErrRejected, h.answer(resp))
	case code >= 300 && code < 400:
		h.redirect.Do(func() {
			h.log.Warn("the http sink's endpoint redirects, and redirects are not followed: set its url to where it leads",
				zap.String("url", h.endpoint), zap.Int("status", code), zap.String("location", resp.Header.Get("Location")))
		})
	}
	return fmt.Errorf("http sink: %s", h.answer(resp))
}

// maxBodyInError is how much of an answer's body an error quotes.
const maxBodyInError = 512

// answer says what resp answered: the request, the status, and the start of
// the body.
func (h *HTTP) answer(resp *http.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s answered %s", h.cfg.Method, h.endpoint, resp.Status)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyInError))
	if s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD")); s != "" {
		b.WriteString(": ")
		b.WriteString(s)
	}
	return b.String()
}

// retryAfter is the wait a Retry-After value asks for: delta-seconds or an
// HTTP date, at most MaxRetryAfter; 0 when v is empty or neither.
func (h *HTTP) retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	limit := h.cfg.MaxRetryAfter
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		if secs >= uint64(limit/time.Second)+1 {
			return limit
		}
		return min(time.Duration(secs)*time.Second, limit)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(h.cfg.Clock.Now()), 0), limit)
}

// drainLimit is how much of a body is read to keep its connection for the
// next request; a longer body closes the connection instead.
const drainLimit = 64 << 10

// drain reads what is left of body, up to drainLimit, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, drainLimit)
	_ = body.Close()
}

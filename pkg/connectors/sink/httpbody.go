package sink

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// What the HTTP sink puts in its requests: the headers of a message, the JSON
// of a batch, and bodies that stop being readable once a request is over.

// The headers of sluice's http source, which the HTTP sink sets.
const (
	headerID        = "X-Numaflow-Id"
	headerKeys      = "X-Numaflow-Keys"
	headerEventTime = "X-Numaflow-Event-Time"
)

// connectionHeaders are the message headers the HTTP sink leaves out: they
// are about a connection or a body's framing, not about the message.
var connectionHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Host": true, "Content-Length": true,
}

// messageHeader returns the headers of m's request: m's own, those of
// sluice's http source, and the configured ones, each winning over the ones
// before. A name or value that cannot be sent makes an error matching
// isb.ErrRejected.
func (h *HTTP) messageHeader(m *isb.Message) (http.Header, error) {
	header := make(http.Header, len(m.Headers)+len(h.cfg.Header)+3)
	for name, v := range m.Headers {
		name = http.CanonicalHeaderKey(name)
		if connectionHeaders[name] {
			continue
		}
		if !validHeaderName(name) || !validHeaderValue(v) {
			return nil, fmt.Errorf("%w: http sink: message %q: header %q cannot be sent in HTTP", isb.ErrRejected, m.ID, name)
		}
		header[name] = []string{v}
	}
	keys := strings.Join(m.Keys, ",")
	if !validHeaderValue(m.ID) || !validHeaderValue(keys) {
		return nil, fmt.Errorf("%w: http sink: message %q: its id or keys cannot be sent in an HTTP header", isb.ErrRejected, m.ID)
	}
	header[headerID] = []string{m.ID}
	if len(m.Keys) > 0 {
		header[headerKeys] = []string{keys}
	} else {
		delete(header, headerKeys)
	}
	header[headerEventTime] = []string{strconv.FormatInt(m.EventTime.UnixMilli(), 10)}
	for name, values := range h.cfg.Header {
		header[name] = values
	}
	return header, nil
}

// validHeaderName reports whether s is an HTTP token, as header names and
// methods are.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s has no control character but tabs.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// eventTimeLayout is RFC 3339 with milliseconds.
const eventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// appendBatch appends to b the JSON array of msgs that the HTTP sink sends in
// batch mode.
func appendBatch(b []byte, msgs []isb.Message) []byte {
	b = append(b, '[')
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, m.ID)
		b = append(b, `,"keys":[`...)
		for j, k := range m.Keys {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, `],"eventTime":"`...)
		b = m.EventTime.UTC().AppendFormat(b, eventTimeLayout)
		b = append(b, `","headers":{`...)
		first := true
		for name, v := range m.Headers {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, name)
			b = append(b, ':')
			b = appendJSONString(b, v)
		}
		b = append(b, `},"value":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Value)
		b = append(b, `"}`...)
	}
	return append(b, ']')
}

// appendJSONString appends s to b as a JSON string; bytes that are not UTF-8
// become U+FFFD, as encoding/json makes them.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if c >= utf8.RuneSelf {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// errBodyDetached is what a request body reads once its request is over.
var errBodyDetached = errors.New("http sink: the request is over")

// payload is the body of a request: bytes that the sink may hold only until
// the request is over. A transport may go on reading a body after the answer
// has come; once detached, a payload reads errBodyDetached instead, so that
// the bytes, a message's or a reused buffer, are never read again.
type payload struct {
	mu       sync.Mutex
	b        []byte
	detached bool
}

// setBody makes b req's body, and returns its payload to detach when the
// request is over.
func setBody(req *http.Request, b []byte) *payload {
	p := &payload{b: b}
	if len(b) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
		return p
	}
	req.ContentLength = int64(len(b))
	req.Body = &payloadReader{p: p}
	req.GetBody = func() (io.ReadCloser, error) { return &payloadReader{p: p}, nil }
	return p
}

// detach makes every reader of p fail from now on.
func (p *payload) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b, p.detached = nil, true
}

// payloadReader reads a payload from its start.
type payloadReader struct {
	p   *payload
	off int
}

func (r *payloadReader) Read(buf []byte) (int, error) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if r.p.detached {
		return 0, errBodyDetached
	}
	if r.off >= len(r.p.b) {
		return 0, io.EOF
	}
	n := copy(buf, r.p.b[r.off:])
	r.off += n
	return n, nil
}

func (r *payloadReader) Close() error { return nil }

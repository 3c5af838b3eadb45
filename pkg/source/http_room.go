package source

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// What an http source holds, and how a request is admitted before its body is
// read.

// Defaults of an HTTPConfig.
const (
	// DefaultHTTPQueue is the Queue of an HTTPConfig that gives none.
	DefaultHTTPQueue = 500
	// DefaultHTTPMaxBodyBytes is the MaxBodyBytes of an HTTPConfig that gives
	// none (64 MiB).
	DefaultHTTPMaxBodyBytes = 64 << 20
	// DefaultHTTPMaxQueueBytes is the MaxQueueBytes of an HTTPConfig that
	// gives none (128 MiB): room for two bodies of the default largest size,
	// or for many small ones.
	DefaultHTTPMaxQueueBytes = 128 << 20
)

// chunkedFirstBytes is what a body of unknown length (chunked) takes at
// admission. It takes more, doubling, as it is read.
const chunkedFirstBytes = 32 << 10

var (
	// errNoRoom is matched by the refusal of a request the queue has no room
	// for, by count or by bytes: 429 Too Many Requests.
	errNoRoom = errors.New("no room in the queue")
	// errTooLarge is matched by the refusal of a body over the largest
	// message size: 413 Content Too Large.
	errTooLarge = errors.New("the body is too large")
)

// queueRoom counts what an [HTTP] source holds against its two limits: the
// messages admitted and not yet read (at most maxCount), and the bytes of the
// bodies admitted and not yet acked (at most maxBytes). A request takes its
// place and its bytes before its body is read; a message gives its place back
// when it is read and its bytes when it is acked (or when its request fails
// before it is queued). A queueRoom is safe for concurrent use.
type queueRoom struct {
	maxCount int
	maxBytes int64

	mu    sync.Mutex
	count int
	bytes int64
}

// admit takes a message's place and n bytes, or nothing and an error matching
// errNoRoom that says which limit is reached.
func (q *queueRoom) admit(n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.count >= q.maxCount {
		return fmt.Errorf("%w: %d messages wait to be read", errNoRoom, q.count)
	}
	if err := q.fits(n); err != nil {
		return err
	}
	q.count++
	q.bytes += n
	return nil
}

// grow takes n more bytes for a message already admitted, or nothing and an
// error matching errNoRoom.
func (q *queueRoom) grow(n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fits(n); err != nil {
		return err
	}
	q.bytes += n
	return nil
}

// fits says whether n more bytes fit. q.mu is held.
func (q *queueRoom) fits(n int64) error {
	if q.bytes+n > q.maxBytes {
		return fmt.Errorf("%w: %d of %d bytes held, %d more needed", errNoRoom, q.bytes, q.maxBytes, n)
	}
	return nil
}

// read gives back the places of k messages read.
func (q *queueRoom) read(k int) {
	q.mu.Lock()
	q.count -= k
	q.mu.Unlock()
}

// free gives back n bytes.
func (q *queueRoom) free(n int64) {
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
}

// release gives back the place and the bytes of a message that is not queued.
func (q *queueRoom) release(n int64) {
	q.mu.Lock()
	q.count--
	q.bytes -= n
	q.mu.Unlock()
}

// held returns the messages waiting to be read and the bytes held.
func (q *queueRoom) held() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.count, q.bytes
}

// admit takes room for r's body before any of it is read: its Content-Length,
// or chunkedFirstBytes for a body of unknown length. It returns the bytes
// taken, or an error matching errTooLarge or errNoRoom.
func (h *HTTP) admit(r *http.Request) (int64, error) {
	n := r.ContentLength
	if n > h.maxBody {
		return 0, fmt.Errorf("%w: Content-Length %d is over the limit of %d bytes", errTooLarge, n, h.maxBody)
	}
	if n < 0 {
		n = min(chunkedFirstBytes, h.maxBody)
	}
	if err := h.room.admit(n); err != nil {
		return 0, err
	}
	return n, nil
}

// readBody reads the body of a request admitted with *held bytes. A body of
// known length is read into a buffer of its size. A body of unknown length is
// read into a buffer that doubles, up to the largest message size, taking the
// bytes of each larger buffer before it is made: it stops with an error
// matching errNoRoom when the queue has no more, or errTooLarge past the
// largest size. *held is what the request holds when readBody returns.
func (h *HTTP) readBody(r *http.Request, held *int64) ([]byte, error) {
	if r.ContentLength >= 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, fmt.Errorf("reading the body: %w", err)
		}
		return body, nil
	}
	body := make([]byte, 0, *held)
	for {
		if len(body) == cap(body) {
			// Full: the body ends here, or needs a larger buffer.
			var one [1]byte
			if n, err := io.ReadFull(r.Body, one[:]); n == 0 {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("reading the body: %w", err)
			}
			if int64(cap(body)) == h.maxBody {
				return nil, fmt.Errorf("%w: over the limit of %d bytes", errTooLarge, h.maxBody)
			}
			next := min(2*int64(cap(body)), h.maxBody)
			if err := h.room.grow(next - int64(cap(body))); err != nil {
				return nil, fmt.Errorf("after %d bytes of a chunked body: %w", len(body), err)
			}
			*held = next
			body = append(append(make([]byte, 0, next), body...), one[0])
			continue
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the body: %w", err)
		}
	}
	// A buffer more than an eighth unused is given up for one of the body's size.
	if waste := int64(cap(body) - len(body)); waste > int64(len(body))/8 {
		body = append([]byte(nil), body...)
		h.room.free(*held - int64(len(body)))
		*held = int64(len(body))
	}
	return body, nil
}

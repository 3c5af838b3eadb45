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

// firstBytes is the most a body takes at admission: its Content-Length up
// to this, or this for a body of unknown length (chunked). It takes more,
// doubling, as its bytes arrive, so that a body holds room for what it has
// sent and not for what it only announced.
const firstBytes = 32 << 10

var (
	// errNoRoom is matched by the refusal of a request the queue has no room
	// for, by count or by bytes: 429 Too Many Requests.
	errNoRoom = errors.New("no room in the queue")
	// errTooLarge is matched by the refusal of a body over the largest
	// message size: 413 Content Too Large.
	errTooLarge = errors.New("the body is too large")
)

// queueRoom counts what an [HTTP] source holds against its two limits: the
// messages whose bodies have arrived and that are not yet read (at most
// maxCount), and the bytes of the bodies admitted and not yet acked (at most
// maxBytes). A request takes bytes at admission and more as its body
// arrives, and its place in the queue once the whole body has arrived; a
// message gives its place back when it is read and its bytes when it is
// acked (or when its request fails before it is queued). A body being read
// holds no place, so bodies that arrive slowly cannot take the places of
// those that arrive. A queueRoom is safe for concurrent use.
type queueRoom struct {
	maxCount int
	maxBytes int64

	mu    sync.Mutex
	count int
	bytes int64
}

// admit takes n bytes for a request whose body is about to be read, when
// the queue has a place and want bytes (its Content-Length, want >= n) fit;
// or it takes nothing and returns an error matching errNoRoom that says
// which limit is reached. It takes no place: enqueue does, once the body has
// arrived.
func (q *queueRoom) admit(want, n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.hasPlace(); err != nil {
		return err
	}
	if err := q.fits(want); err != nil {
		return err
	}
	q.bytes += n
	return nil
}

// enqueue takes a place for a message whose body has arrived, or nothing and
// an error matching errNoRoom.
func (q *queueRoom) enqueue() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.hasPlace(); err != nil {
		return err
	}
	q.count++
	return nil
}

// grow takes n more bytes for a body being read, or nothing and an error
// matching errNoRoom.
func (q *queueRoom) grow(n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fits(n); err != nil {
		return err
	}
	q.bytes += n
	return nil
}

// hasPlace says whether a message has a place in the queue. q.mu is held.
func (q *queueRoom) hasPlace() error {
	if q.count >= q.maxCount {
		return fmt.Errorf("%w: %d messages wait to be read", errNoRoom, q.count)
	}
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

// held returns the messages waiting to be read and the bytes held.
func (q *queueRoom) held() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.count, q.bytes
}

// admit takes room for r's body before any of it is read: it checks that the
// queue has a place and that its Content-Length (firstBytes for a body of
// unknown length) fits in what is left, and takes up to firstBytes of it. It
// returns the bytes taken, or an error matching errTooLarge or errNoRoom.
func (h *HTTP) admit(r *http.Request) (int64, error) {
	want := r.ContentLength
	if want > h.maxBody {
		return 0, fmt.Errorf("%w: Content-Length %d is over the limit of %d bytes", errTooLarge, want, h.maxBody)
	}
	if want < 0 {
		want = min(firstBytes, h.maxBody)
	}
	n := min(want, firstBytes)
	if err := h.room.admit(want, n); err != nil {
		return 0, err
	}
	return n, nil
}

// readBody reads the body of a request admitted with *held bytes, at the
// pace its reader keeps ([pacedBody]). The body is read into a buffer that doubles
// as its bytes arrive, up to its Content-Length, or to the largest message
// size for a body of unknown length, taking the bytes of each larger buffer
// before it is made: it stops with an error matching errNoRoom when the
// queue has no more, or errTooLarge past the largest size. *held is what the
// request holds when readBody returns.
func (h *HTTP) readBody(r *http.Request, held *int64) ([]byte, error) {
	body := r.Body
	length, limit := r.ContentLength, r.ContentLength
	if length < 0 {
		limit = h.maxBody
	}
	buf := make([]byte, 0, *held)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == length {
				break
			}
			// Full: the body ends here, or needs a larger buffer.
			var one [1]byte
			got := 0
			if length < 0 {
				n, err := io.ReadFull(body, one[:])
				if n == 0 {
					if errors.Is(err, io.EOF) {
						break
					}
					return nil, readError(err)
				}
				if int64(cap(buf)) == h.maxBody {
					return nil, fmt.Errorf("%w: over the limit of %d bytes", errTooLarge, h.maxBody)
				}
				got = 1
			}
			next := min(2*int64(cap(buf)), limit)
			if err := h.room.grow(next - int64(cap(buf))); err != nil {
				return nil, fmt.Errorf("after %d bytes of the body: %w", len(buf), err)
			}
			*held = next
			buf = append(append(make([]byte, 0, next), buf...), one[:got]...)
			continue
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readError(err)
		}
	}
	// A buffer more than an eighth unused is given up for one of the body's size.
	if waste := int64(cap(buf) - len(buf)); waste > int64(len(buf))/8 {
		buf = append([]byte(nil), buf...)
		h.room.free(*held - int64(len(buf)))
		*held = int64(len(buf))
	}
	return buf, nil
}

// readError is the error of a body that could not be read: err as it is
// when the body missed its pace, which is said in full.
func readError(err error) error {
	if errors.Is(err, errSlowBody) {
		return err
	}
	return fmt.Errorf("reading the body: %w", err)
}

package udfserver

// Framed is how a request of a batched stream is read: the datum it carries,
// if any, and whether it ends the batch.
type Framed[D any] struct {
	Datum    D
	HasDatum bool
	EOT      bool
}

// batchBuffer is how many datums may wait for the user's function.
const batchBuffer = 64

// ReadBatch reads one batch from rx: requests up to and including the next
// end-of-transmission marker, as parse frames them. The datums go, as they
// arrive, to consume, which runs in its own goroutine from the first datum of
// the batch on and must read its channel until it is closed, at the end of
// the batch. ReadBatch returns the batch's datums in arrival order once
// consume has returned.
//
// When the stream ends, end is true: a batch the end cut short is still
// consumed and returned, and an empty batch means there was nothing left.
// An error from parse, from consume (a panic turned into an error by Call),
// or from the stream is returned as is.
func ReadBatch[Req, D any](rx *Receiver[Req], parse func(*Req) (Framed[D], error), consume func(<-chan D) error) (batch []D, end bool, err error) {
	var (
		ch   chan D
		done chan error // consume's result; nil until it starts
	)
	finish := func() error {
		if ch == nil {
			return nil
		}
		close(ch)
		if done != nil {
			return <-done
		}
		return nil
	}
	for {
		var req *Req
		var ok bool
		if done == nil {
			req, ok = <-rx.C()
		} else {
			select {
			case req, ok = <-rx.C():
			case err := <-done:
				// consume returned before the end of the batch.
				done = nil
				if err != nil {
					return nil, false, err
				}
				continue
			}
		}
		if !ok {
			if err := rx.Err(); err != nil {
				_ = finish()
				return nil, true, err
			}
			return batch, true, finish()
		}
		f, err := parse(req)
		if err != nil {
			_ = finish()
			return nil, false, err
		}
		if f.HasDatum {
			if ch == nil {
				ch = make(chan D, batchBuffer)
				done = make(chan error, 1)
				go func() { done <- consume(ch) }()
			}
			batch = append(batch, f.Datum)
			if err := feed(ch, f.Datum, &done); err != nil {
				return nil, false, err
			}
		}
		if f.EOT {
			return batch, false, finish()
		}
	}
}

// feed hands d to the consumer unless it has already returned; *done is set
// to nil once its result has been taken.
func feed[D any](ch chan D, d D, done *chan error) error {
	if *done == nil {
		return nil // the consumer stopped reading; the datum goes unconsumed
	}
	select { // the usual case, with room in the channel: no select on done
	case ch <- d:
		return nil
	default:
	}
	select {
	case ch <- d:
		return nil
	case err := <-*done:
		*done = nil
		return err
	}
}

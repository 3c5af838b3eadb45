package udfserver

// Forward runs produce, user code that sends values on the channel it is
// given, in a goroutine of its own through s.Call, and passes each value to
// fwd, in order, as it arrives, until produce returns. produce may close the
// channel when done, but must not send after it has returned. Once fwd has
// failed, the remaining values are received and dropped, so that produce
// can return. Forward returns produce's panic as an error (see Call), else
// fwd's first error.
func Forward[T any](s *Server, produce func(out chan<- T), fwd func(T) error) error {
	out := make(chan T)
	done := make(chan error, 1)
	go func() { done <- s.Call(func() { produce(out) }) }()

	in := (<-chan T)(out)
	var fwdErr error
	for {
		select {
		case v, ok := <-in:
			if !ok {
				in = nil // produce closed the channel; wait for it to return
				continue
			}
			if fwdErr == nil {
				fwdErr = fwd(v)
			}
		case err := <-done:
			// produce has returned: every value it sent has been received,
			// since the channel is unbuffered.
			if err != nil {
				return err
			}
			return fwdErr
		}
	}
}

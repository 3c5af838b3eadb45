package sinkclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/udsconn"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Client is the runtime's side of a user-defined sink served over sink.v1 on
// a unix socket: an [isb.Writer]. A batch goes over one stream, ended by an
// end-of-transmission message; the server answers each message with a
// status: SUCCESS, FAILURE (retried), FALLBACK (routed to the fallback sink),
// or NACK (an error matching isb.ErrNack: not retried, the message is handed
// back to its source), ON_SUCCESS (written, and to be written to the
// on-success sink too: an isb.OnSuccessError, with the sink's on_success_msg
// if it sent one). SERVE counts as written.
type Client struct {
	conn   *udsconn.Conn
	stream *udsconn.Stream[sinkv1.SinkRequest, sinkv1.SinkResponse]
	log    *zap.Logger
	seq    uint64
	once   sync.Once
	// watermark returns the watermark requests carry; nil: none (-1).
	watermark func() time.Time
	// limit is the AIMD limit on the messages sent in one exchange, 0 for
	// none, and largest the most a batch has had (see Write).
	limit, largest int
}

var _ isb.Writer = (*Client)(nil)

// New returns a client, not yet connected, of the user-defined sink of kind
// ([udf.KindSink], [udf.KindFallbackSink] or [udf.KindOnSuccessSink]) served
// in dir; opts configure its connection ([udf.WithCalls] gives its calls
// their deadline).
func New(dir string, kind udf.Kind, log *zap.Logger, opts ...udf.Option) *Client {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Client{log: log}
	s.conn = udsconn.New(dir, kind, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := sinkv1.NewSinkClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	s.stream = udsconn.NewStream[sinkv1.SinkRequest, sinkv1.SinkResponse](s.conn)
	s.stream.Name = "SinkFn"
	s.stream.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[sinkv1.SinkRequest, sinkv1.SinkResponse], error) {
		return sinkv1.NewSinkClient(cc).SinkFn(ctx)
	}
	s.stream.Handshake = func() *sinkv1.SinkRequest {
		return &sinkv1.SinkRequest{Handshake: &sinkv1.Handshake{Sot: true}}
	}
	s.stream.Echoed = func(m *sinkv1.SinkResponse) bool { return m.GetHandshake().GetSot() }
	return s
}

// SetWatermark makes every request carry the watermark wm returns when its
// batch is sent (before the first batch). Without it requests carry -1,
// none.
func (s *Client) SetWatermark(wm func() time.Time) { s.watermark = wm }

// Connect waits until the server is up and ready, or ctx ends. An
// incompatible server gives an error matching [udf.ErrIncompatible].
func (s *Client) Connect(ctx context.Context) error {
	_, _, err := s.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (s *Client) Ready() error { return s.conn.Ready() }

// Close closes the connection.
func (s *Client) Close() error {
	s.stream.Close()
	return s.conn.Close()
}

// Write sends msgs as one batch and records each message's status in errs.
//
// The messages in flight at once have an AIMD limit: when the sink fails a
// message because what it writes to is rate limited (see
// [RateLimitedMarker]), the limit becomes half of what the exchange sent,
// and the messages of the batch not sent yet are not sent: each gets an
// [*isb.ThrottledError] with the sink's Retry-After and no signal of its
// own, so the forwarder tries them again after the wait. Each exchange
// without such a failure raises the limit by one, until it reaches the
// largest batch, when there is none again. So after a sink's first
// refusal, a batch is not all sent into the wall. Write is not safe for
// concurrent use.
func (s *Client) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	if len(msgs) == 0 {
		return nil
	}
	s.largest = max(s.largest, len(msgs))
	for off := 0; off < len(msgs); {
		n := len(msgs) - off
		if s.limit > 0 {
			n = min(n, s.limit)
		}
		if err := s.exchange(ctx, msgs[off:off+n], errs[off:off+n]); err != nil {
			if off == 0 {
				return err
			}
			for i := off; i < len(msgs); i++ {
				errs[i] = err // the exchanges before were answered
			}
			return nil
		}
		off += n
		te := refusedIn(errs[off-n : off])
		if te == nil {
			if s.limit > 0 {
				if s.limit++; s.limit >= s.largest {
					s.limit = 0
				}
			}
			continue
		}
		s.limit = max(1, n/2)
		for i := off; i < len(msgs); i++ {
			errs[i] = &isb.ThrottledError{RetryAfter: te.RetryAfter,
				Cause: "user-defined sink: not sent: the sink said what it writes to is rate limited"}
		}
		break
	}
	return nil
}

// Limit returns the limit on the messages sent to the sink in one
// exchange, 0 for none.
func (s *Client) Limit() int { return s.limit }

// refusedIn returns the first of errs that says the sink is rate limited,
// or nil.
func refusedIn(errs []error) *isb.ThrottledError {
	for _, err := range errs {
		var te *isb.ThrottledError
		if errors.As(err, &te) && te.Signal == isb.SignalSinkRateLimited {
			return te
		}
	}
	return nil
}

// exchange sends msgs over the stream as one batch and records each
// message's status in errs.
func (s *Client) exchange(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.seq++
	prefix := strconv.FormatUint(s.seq, 10) + "-"
	answered := make([]bool, len(msgs))
	pending := len(msgs)
	wm := time.UnixMilli(-1)
	if s.watermark != nil {
		wm = s.watermark()
	}
	wmTS := timestamppb.New(wm)
	send := func(send func(*sinkv1.SinkRequest) error) error {
		for i := range msgs {
			m := &msgs[i]
			req := &sinkv1.SinkRequest{Request: &sinkv1.SinkRequest_Request{
				Id: prefix + strconv.Itoa(i), Keys: m.Keys, Value: m.Value, EventTime: timestamppb.New(m.EventTime),
				Watermark: wmTS, Headers: m.Headers, Metadata: isbproto.ToMetadata(m.Metadata)}}
			if err := send(req); err != nil {
				return err
			}
		}
		return send(&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}})
	}
	recv := func(resp *sinkv1.SinkResponse) (bool, error) {
		if resp.GetStatus().GetEot() {
			if pending > 0 {
				return true, fmt.Errorf("%w: end of batch with %d messages unanswered", udf.ErrProtocol, pending)
			}
			return true, nil
		}
		for _, r := range resp.GetResults() {
			i, err := index(r.GetId(), prefix, len(msgs))
			if err != nil {
				return true, err
			}
			if !answered[i] {
				answered[i] = true
				pending--
			}
			errs[i] = s.status(r)
		}
		return false, nil
	}
	if err := s.stream.Exchange(ctx, len(msgs), send, recv); err != nil {
		if errors.Is(err, udsconn.ErrServerFailed) {
			return unavailable{udsconn.Wrap("user-defined sink", err)}
		}
		return udsconn.Wrap("user-defined sink", err)
	}
	return nil
}

// unavailable is the error of a write to a sink whose server failed: it
// matches isb.ErrUnavailable, so that the forwarder retries it once the
// server is back without using a retry step, and what its error matches.
type unavailable struct{ error }

func (u unavailable) Unwrap() error        { return u.error }
func (u unavailable) Is(target error) bool { return target == isb.ErrUnavailable }

func (s *Client) status(r *sinkv1.SinkResponse_Result) error {
	switch r.GetStatus() {
	case sinkv1.Status_SUCCESS:
		return nil
	case sinkv1.Status_FALLBACK:
		return isb.ErrFallback
	case sinkv1.Status_NACK:
		return &isb.NackError{Options: isbproto.FromNackOptions(r.GetNackOptions())}
	case sinkv1.Status_ON_SUCCESS:
		oe := &isb.OnSuccessError{}
		if m := r.GetOnSuccessMsg(); m != nil {
			oe.Message = &isb.Message{Value: m.GetValue(), Keys: m.GetKeys()}
			if m.Metadata != nil {
				oe.Message.Metadata = isbproto.FromMetadata(m.GetMetadata())
				if oe.Message.Metadata == nil {
					oe.Message.Metadata = isb.Metadata{}
				}
			}
		}
		return oe
	case sinkv1.Status_SERVE:
		s.once.Do(func() {
			s.log.Warn("the sink answers SERVE, which sluice counts as written (it has no serving store)")
		})
		return nil
	default:
		if te := rateLimited(r.GetErrMsg()); te != nil {
			return te
		}
		return fmt.Errorf("user-defined sink failed the message: %s", r.GetErrMsg())
	}
}

func index(id, prefix string, n int) (int, error) {
	if len(id) > len(prefix) && id[:len(prefix)] == prefix {
		if i, err := strconv.Atoi(id[len(prefix):]); err == nil && i >= 0 && i < n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: answer for unknown id %q", udf.ErrProtocol, id)
}

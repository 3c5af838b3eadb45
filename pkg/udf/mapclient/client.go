package mapclient

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Tags with a meaning of their own in the results of a map or a transformer.
const (
	// DropTag marks a result that is to be dropped (to_drop).
	DropTag = "U+005C__DROP__"
	// NackTag marks the result of an input the function rejects: nothing of
	// the input is written, and it is handed back to its source to come back
	// as the result's nack options say.
	NackTag = "U+005C__NACK__"
	// RateLimitedTag marks the result of an input the function could not
	// handle because what it calls is rate limited: like NackTag, the input
	// is handed back (after the result's nack delay, its Retry-After), and it
	// is a throttle signal (isb.SignalMapRateLimited) that, with
	// rateLimit.adaptive, cuts the vertex's limit. sluice's own tag.
	RateLimitedTag = "U+005C__RATE_LIMITED__"
	// FailTag marks the result of an input the function failed: the input is
	// tried again as the function's retryStrategy says (udf.FailTag).
	FailTag = udf.FailTag
)

// Client is a user-defined function served over gRPC on a unix socket: a map
// (unary, batch or stream, as the server's info says) or a source transformer.
// It is a [udf.Mapper] and a [udf.Forker]: a batch goes over one stream with every request in flight at
// once and answers matched by id, so one slow message does not hold up the
// others. After a failure the batch's error is returned (the forwarder retries
// it) and the next batch reconnects, waiting for the server to be back.
type Client struct {
	conn *udsconn.Conn
	kind serverinfo.Kind
	mapS *udsconn.Stream[mapRequest, mapResponse]
	stS  *udsconn.Stream[stv1.SourceTransformRequest, stv1.SourceTransformResponse]
	seq  uint64
	// results[i] are the answers to in[i] of the batch in progress.
	results [][]result
	eots    []bool
	// Requests, reused from batch to batch: a request is encoded before Send
	// returns, and a batch's sends end before Map returns.
	mapReqs []mapRequest
	stReqs  []stv1.SourceTransformRequest
	stBods  []stv1.SourceTransformRequest_Request
	times   []timestamppb.Timestamp
	markTS  *timestamppb.Timestamp // the watermark a transformer's batch carries
	// watermark returns the watermark requests carry; nil: none (-1).
	watermark func() time.Time
}

// result is one answer of a map or transformer, in common form.
type result struct {
	keys, tags []string
	value      []byte
	eventTime  *timestamppb.Timestamp
	metadata   *common.Metadata
	nack       *common.NackOptions
}

var _ udf.Mapper = (*Client)(nil)

// New returns the client of the map UDF served in dir; opts configure its
// connection ([udf.WithCalls] gives its calls their deadline).
func New(dir string, log *zap.Logger, opts ...udf.Option) *Client {
	r := &Client{kind: serverinfo.KindMap}
	r.conn = udsconn.New(dir, serverinfo.KindMap, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := mapv1.NewMapClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	r.mapS = udsconn.NewStream[mapRequest, mapResponse](r.conn)
	r.mapS.Name = "MapFn"
	r.mapS.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[mapRequest, mapResponse], error) {
		// map.v1.Map/MapFn, with the requests and answers encoded by hand
		// (mapwire.go) by the connection's codec.
		st, err := cc.NewStream(ctx, &mapv1.Map_ServiceDesc.Streams[0], mapv1.Map_MapFn_FullMethodName)
		if err != nil {
			return nil, err
		}
		return &mapStream{ClientStream: st}, nil
	}
	r.mapS.Handshake = func() *mapRequest { return &mapRequest{handshake: true} }
	r.mapS.Echoed = func(m *mapResponse) bool { return m.handshake }
	return r
}

// NewTransformer returns the client of the source transformer served in dir;
// opts configure its connection.
func NewTransformer(dir string, log *zap.Logger, opts ...udf.Option) *Client {
	r := &Client{kind: serverinfo.KindSourceTransformer}
	r.conn = udsconn.New(dir, serverinfo.KindSourceTransformer, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := stv1.NewSourceTransformClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	r.stS = udsconn.NewStream[stv1.SourceTransformRequest, stv1.SourceTransformResponse](r.conn)
	r.stS.Name = "SourceTransformFn"
	r.stS.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[stv1.SourceTransformRequest, stv1.SourceTransformResponse], error) {
		return stv1.NewSourceTransformClient(cc).SourceTransformFn(ctx)
	}
	r.stS.Handshake = func() *stv1.SourceTransformRequest {
		return &stv1.SourceTransformRequest{Handshake: &stv1.Handshake{Sot: true}}
	}
	r.stS.Echoed = func(m *stv1.SourceTransformResponse) bool { return m.GetHandshake().GetSot() }
	return r
}

// SetWatermark makes every request carry the watermark wm returns when its
// batch is sent (before the first batch). Without it requests carry -1,
// none.
func (r *Client) SetWatermark(wm func() time.Time) { r.watermark = wm }

// mark returns the watermark the next batch carries.
func (r *Client) mark() timestamp {
	if r.watermark == nil {
		return watermarkNone
	}
	t := r.watermark()
	return timestamp{t.Unix(), int32(t.Nanosecond())}
}

// Connect waits until the server is up and ready, or ctx ends. An incompatible
// server gives an error matching [udf.ErrIncompatible].
func (r *Client) Connect(ctx context.Context) error {
	_, _, err := r.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (r *Client) Ready() error { return r.conn.Ready() }

// Close closes the connection.
func (r *Client) Close() error {
	r.closeStream()
	return r.conn.Close()
}

// closeStream closes r's stream, leaving the connection open.
func (r *Client) closeStream() {
	if r.mapS != nil {
		r.mapS.Close()
	}
	if r.stS != nil {
		r.stS.Close()
	}
}

// Map sends in to the server and appends its answers to out, in the order of in.
func (r *Client) Map(ctx context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	if len(in) == 0 {
		return out, 0, nil
	}
	r.seq++
	prefix := strconv.FormatUint(r.seq, 10) + "-"
	r.results = slices.Grow(r.results[:0], len(in))[:len(in)]
	r.eots = slices.Grow(r.eots[:0], len(in))[:len(in)]
	for i := range r.results {
		r.results[i] = r.results[i][:0]
		r.eots[i] = false
	}
	var err error
	if r.stS != nil {
		err = r.transform(ctx, in, prefix)
	} else {
		_, info, cerr := r.conn.Get(ctx)
		if cerr != nil {
			return out, 0, cerr
		}
		err = r.mapBatch(ctx, in, prefix, info.MapKind())
	}
	if err != nil {
		return out, 0, udsconn.Wrap(string(r.kind)+" UDF", err)
	}
	return r.collect(in, out)
}

// index returns the batch index of an answer's id.
func (r *Client) index(id, prefix string, n int) (int, error) {
	rest, ok := strings.CutPrefix(id, prefix)
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 || i >= n {
		return 0, fmt.Errorf("%w: answer for unknown id %q", udsconn.ErrProtocol, id)
	}
	return i, nil
}

// reuse returns s with length n, new when s is too short: protobuf messages
// are not to be copied, so s is never grown.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// eventTimes sets r.times[i] to the event time of in[i].
func (r *Client) eventTimes(in []isb.Message) {
	r.times = reuse(r.times, len(in))
	for i := range in {
		t := in[i].EventTime
		r.times[i].Seconds, r.times[i].Nanos = t.Unix(), int32(t.Nanosecond())
	}
	if r.markTS == nil {
		r.markTS = &timestamppb.Timestamp{}
	}
	wm := r.mark()
	r.markTS.Seconds, r.markTS.Nanos = wm.seconds, wm.nanos
}

// watermarkNone is the watermark of none: -1 ms.
var watermarkNone = timestamp{seconds: -1, nanos: 999_000_000}

func (r *Client) mapBatch(ctx context.Context, in []isb.Message, prefix string, mode serverinfo.Kind) error {
	r.mapReqs = reuse(r.mapReqs, len(in))
	wm := r.mark()
	send := func(send func(*mapRequest) error) error {
		for i := range in {
			m, req := &in[i], &r.mapReqs[i]
			req.setMessage(m, prefix, i, timestamp{m.EventTime.Unix(), int32(m.EventTime.Nanosecond())}, wm,
				isbproto.ToMetadata(m.Metadata))
			if err := send(req); err != nil {
				return err
			}
		}
		if mode == serverinfo.KindBatchMap {
			return send(&mapRequest{eot: true})
		}
		return nil
	}
	pending := len(in)
	recv := func(resp *mapResponse) (bool, error) {
		if mode == serverinfo.KindBatchMap && resp.eot {
			if pending > 0 {
				return true, fmt.Errorf("%w: end of batch with %d messages unanswered", udsconn.ErrProtocol, pending)
			}
			return true, nil
		}
		i, err := r.index(resp.id, prefix, len(in))
		if err != nil {
			return true, err
		}
		if mode == serverinfo.KindMapStream && resp.eot {
			if r.eots[i] {
				return true, fmt.Errorf("%w: two ends for id %q", udsconn.ErrProtocol, resp.id)
			}
			r.eots[i] = true
			pending--
			return pending == 0, nil
		}
		r.results[i] = append(r.results[i], resp.results...)
		if mode == serverinfo.KindMap {
			if r.eots[i] {
				return true, fmt.Errorf("%w: two answers for id %q", udsconn.ErrProtocol, resp.id)
			}
			r.eots[i] = true
			pending--
			return pending == 0, nil
		}
		if mode == serverinfo.KindBatchMap {
			if !r.eots[i] {
				r.eots[i] = true
				pending--
			}
		}
		return false, nil
	}
	return r.mapS.Exchange(ctx, len(in), send, recv)
}

func (r *Client) transform(ctx context.Context, in []isb.Message, prefix string) error {
	r.eventTimes(in)
	r.stReqs = reuse(r.stReqs, len(in))
	r.stBods = reuse(r.stBods, len(in))
	send := func(send func(*stv1.SourceTransformRequest) error) error {
		for i := range in {
			m, req, body := &in[i], &r.stReqs[i], &r.stBods[i]
			body.Id, body.Keys, body.Value, body.Headers = prefix+strconv.Itoa(i), m.Keys, m.Value, m.Headers
			body.EventTime, body.Watermark = &r.times[i], r.markTS
			body.Metadata = isbproto.ToMetadata(m.Metadata)
			req.Request = body
			if err := send(req); err != nil {
				return err
			}
		}
		return nil
	}
	pending := len(in)
	recv := func(resp *stv1.SourceTransformResponse) (bool, error) {
		i, err := r.index(resp.GetId(), prefix, len(in))
		if err != nil {
			return true, err
		}
		if r.eots[i] {
			return true, fmt.Errorf("%w: two answers for id %q", udsconn.ErrProtocol, resp.GetId())
		}
		r.eots[i] = true
		for _, res := range resp.GetResults() {
			r.results[i] = append(r.results[i], result{keys: res.GetKeys(), tags: res.GetTags(), value: res.GetValue(),
				eventTime: res.GetEventTime(), metadata: res.GetMetadata(), nack: res.GetNackOptions()})
		}
		pending--
		return pending == 0, nil
	}
	return r.stS.Exchange(ctx, len(in), send, recv)
}

// collect appends the answers, in the order of in, and counts the messages that
// produced nothing but drops. An input with a result tagged [FailTag] gives
// itself back, failed (udf.Fail), in place of all its results; one with a
// result tagged [NackTag] gives one message with Nack set; one tagged
// [RateLimitedTag] the same, with Nack.RateLimited. A result without
// metadata keeps its input's.
func (r *Client) collect(in, out []isb.Message) ([]isb.Message, int, error) {
	dropped := 0
	for i, results := range r.results {
		if failed(results) {
			out = append(out, udf.Fail(in[i]))
			continue
		}
		if j := slices.IndexFunc(results, func(res result) bool {
			return slices.Contains(res.tags, NackTag) || slices.Contains(res.tags, RateLimitedTag)
		}); j >= 0 {
			opts := isbproto.FromNackOptions(results[j].nack)
			opts.RateLimited = slices.Contains(results[j].tags, RateLimitedTag)
			out = append(out, isb.Message{ID: in[i].ID, Origin: in[i].Origin, Nack: &opts})
			continue
		}
		kept := 0
		for j, res := range results {
			if slices.Contains(res.tags, DropTag) {
				continue
			}
			m := isb.Message{ID: in[i].ID, Keys: res.keys, Value: res.value, Tags: res.tags,
				EventTime: in[i].EventTime, Headers: in[i].Headers, Metadata: in[i].Metadata, Origin: in[i].Origin}
			if len(results) > 1 {
				m.ID += "-" + strconv.Itoa(j)
			}
			if res.eventTime != nil {
				m.EventTime = res.eventTime.AsTime()
			}
			if res.metadata != nil {
				m.Metadata = isbproto.FromMetadata(res.metadata)
			}
			out = append(out, m)
			kept++
		}
		if kept == 0 {
			dropped++
		}
	}
	return out, dropped, nil
}

// failed reports whether one of results is tagged FailTag.
func failed(results []result) bool {
	for i := range results {
		if slices.Contains(results[i].tags, FailTag) {
			return true
		}
	}
	return false
}

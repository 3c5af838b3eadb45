package sinker

import (
	"time"

	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// NackOptions tell the runtime how to redeliver a nacked message: after
// Delay milliseconds, at most MaxDeliveries times, with a Reason for the
// logs and free-form values in NackMap. Every field is optional; nil means
// the runtime's default.
type NackOptions = nack.Options

// Response tells how writing one message went. Build it with one of the
// Response functions.
type Response struct {
	id     string
	status sinkv1.Status
	errMsg string
	serve  []byte
	nack   *NackOptions
	// onSuccess is the message for the on-success sink; nil: the input.
	onSuccess *OnSuccessMessage
}

// OnSuccessMessage is what ResponseOnSuccessMessage asks the runtime to
// write to the on-success sink in place of the input: its Value and Keys,
// and its UserMetadata (nil: the input's).
type OnSuccessMessage struct {
	Value        []byte
	Keys         []string
	UserMetadata *UserMetadata
}

// Responses are the answers to a batch, one per datum.
type Responses []Response

// ResponseOK reports that the message with ID id was written.
func ResponseOK(id string) Response {
	return Response{id: id, status: sinkv1.Status_SUCCESS}
}

// ResponseFailure reports that the message with ID id could not be written,
// because of errMsg; the runtime retries it.
func ResponseFailure(id, errMsg string) Response {
	return Response{id: id, status: sinkv1.Status_FAILURE, errMsg: errMsg}
}

// ResponseFallback asks the runtime to write the message with ID id to the
// vertex's fallback sink instead.
func ResponseFallback(id string) Response {
	return Response{id: id, status: sinkv1.Status_FALLBACK}
}

// ResponseServe reports that the message with ID id was written, and hands
// payload to the runtime's serving store (for a serving pipeline).
func ResponseServe(id string, payload []byte) Response {
	return Response{id: id, status: sinkv1.Status_SERVE, serve: payload}
}

// ResponseOnSuccess reports that the message with ID id was written, and
// asks the runtime to write it to the vertex's on-success sink as well.
func ResponseOnSuccess(id string) Response {
	return Response{id: id, status: sinkv1.Status_ON_SUCCESS}
}

// ResponseOnSuccessMessage reports that the message with ID id was written,
// and asks the runtime to write msg to the vertex's on-success sink in its
// place (on_success_msg). msg is not copied.
func ResponseOnSuccessMessage(id string, msg OnSuccessMessage) Response {
	return Response{id: id, status: sinkv1.Status_ON_SUCCESS, onSuccess: &msg}
}

// ResponseNack reports that the message with ID id was not written and
// asks the runtime to negatively acknowledge (nack) it, so that it is
// delivered again later, as opts say (nil: with the runtime's defaults;
// opts is not copied). Unlike ResponseFailure, which the runtime retries as
// the vertex's retry strategy says, a nack gives the message back to be
// read again.
func ResponseNack(id string, opts *NackOptions) Response {
	return Response{id: id, status: sinkv1.Status_NACK, nack: opts}
}

// ResponseRateLimited reports that the message with ID id was not written
// because what the sink writes to is rate limited, and asked to be left
// alone for retryAfter (0 when it did not say); reason says more, for logs.
// It is a failure whose error message begins with the marker
// "U+005C__RATE_LIMITED__", then " retry-after=" and the wait, then ": " and
// the reason. The runtime takes it as a throttle signal (sinkRateLimited):
// it tries the message again after retryAfter without using a retry step,
// and with rateLimit.adaptive the vertex's limit is cut for every replica.
// A sink written with another SDK signals the same way with a failure whose
// error message begins with the marker.
func ResponseRateLimited(id string, retryAfter time.Duration, reason string) Response {
	return Response{id: id, status: sinkv1.Status_FAILURE, errMsg: nack.FormatRateLimited(retryAfter, reason)}
}

// ID is the ID of the message r is about.
func (r Response) ID() string { return r.id }

// OK reports whether r says the message was written (including to the
// serving store or with a copy to the on-success sink).
func (r Response) OK() bool {
	return r.status == sinkv1.Status_SUCCESS || r.status == sinkv1.Status_SERVE || r.status == sinkv1.Status_ON_SUCCESS
}

// Err is the error message of a failure; empty otherwise.
func (r Response) Err() string { return r.errMsg }

// IsOnSuccess reports whether r asks for the on-success sink.
func (r Response) IsOnSuccess() bool { return r.status == sinkv1.Status_ON_SUCCESS }

// OnSuccessMessage is the message r asks to write to the on-success sink in
// place of the input; nil for other responses, or to write the input.
func (r Response) OnSuccessMessage() *OnSuccessMessage { return r.onSuccess }

// IsFallback reports whether r asks for the fallback sink.
func (r Response) IsFallback() bool { return r.status == sinkv1.Status_FALLBACK }

// IsNack reports whether r nacks the message.
func (r Response) IsNack() bool { return r.status == sinkv1.Status_NACK }

// NackOptions are the options of a nack; nil for other responses, or if the
// nack was given none.
func (r Response) NackOptions() *NackOptions { return r.nack }

func (r Response) result() *sinkv1.SinkResponse_Result {
	res := &sinkv1.SinkResponse_Result{Id: r.id, Status: r.status, ErrMsg: r.errMsg}
	switch r.status {
	case sinkv1.Status_SERVE:
		res.ServeResponse = r.serve
	case sinkv1.Status_NACK:
		res.NackOptions = nack.ToProto(r.nack)
	case sinkv1.Status_ON_SUCCESS:
		if m := r.onSuccess; m != nil {
			res.OnSuccessMsg = &sinkv1.SinkResponse_Result_Message{Value: m.Value, Keys: m.Keys}
			if m.UserMetadata != nil {
				res.OnSuccessMsg.Metadata = metadata.ToProto(m.UserMetadata)
			}
		}
	}
	return res
}

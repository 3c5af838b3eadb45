package sinker

import sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"

// Response tells how writing one message went. Build it with one of the
// Response functions.
type Response struct {
	id     string
	status sinkv1.Status
	errMsg string
	serve  []byte
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

// ID is the ID of the message r is about.
func (r Response) ID() string { return r.id }

// OK reports whether r says the message was written (including to the
// serving store or with a copy to the on-success sink).
func (r Response) OK() bool {
	return r.status == sinkv1.Status_SUCCESS || r.status == sinkv1.Status_SERVE || r.status == sinkv1.Status_ON_SUCCESS
}

// Err is the error message of a failure; empty otherwise.
func (r Response) Err() string { return r.errMsg }

// IsFallback reports whether r asks for the fallback sink.
func (r Response) IsFallback() bool { return r.status == sinkv1.Status_FALLBACK }

func (r Response) result() *sinkv1.SinkResponse_Result {
	res := &sinkv1.SinkResponse_Result{Id: r.id, Status: r.status, ErrMsg: r.errMsg}
	if r.status == sinkv1.Status_SERVE {
		res.ServeResponse = r.serve
	}
	return res
}

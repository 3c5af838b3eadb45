package mapclient

import (
	"github.com/sluiceflow/sluice/internal/udsconn"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/udf"
)

var _ udf.Forker = (*Client)(nil)

// Fork returns a client of the same server on the same connection, with a
// stream of its own, so that its batches are in flight along with r's. Its
// Close closes only its stream.
func (r *Client) Fork() udf.Mapper {
	f := &Client{conn: r.conn, kind: r.kind}
	if r.mapS != nil {
		f.mapS = udsconn.NewStream[mapRequest, mapResponse](r.conn)
		f.mapS.Open, f.mapS.Handshake, f.mapS.Echoed, f.mapS.Name = r.mapS.Open, r.mapS.Handshake, r.mapS.Echoed, r.mapS.Name
	}
	if r.stS != nil {
		f.stS = udsconn.NewStream[stv1.SourceTransformRequest, stv1.SourceTransformResponse](r.conn)
		f.stS.Open, f.stS.Handshake, f.stS.Echoed, f.stS.Name = r.stS.Open, r.stS.Handshake, r.stS.Echoed, r.stS.Name
	}
	return forked{f}
}

// forked is a fork of a Client: it shares the connection, which its Close
// leaves open.
type forked struct{ *Client }

// Close closes the fork's stream.
func (f forked) Close() error {
	f.closeStream()
	return nil
}

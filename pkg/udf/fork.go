package udf

import (
	"github.com/sluiceflow/sluice/internal/udsconn"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
)

// Forker is a [Mapper] that can make more of itself, for a forwarder that maps
// several batches at once (a streaming MonoVertex). Fork returns a Mapper that
// may map while this one and the other forks do; a fork that is an io.Closer
// is closed by whoever forked it, before the original. A Mapper that is not a
// Forker is called one batch at a time.
type Forker interface {
	Fork() Mapper
}

// Fork returns c: cat keeps no state.
func (c Cat) Fork() Mapper { return c }

// Fork returns f, which is safe for concurrent use.
func (f *Filter) Fork() Mapper { return f }

// Fork returns x, which is safe for concurrent use.
func (x *Extractor) Fork() Mapper { return x }

// Fork returns a chain of forks, or c itself when none of its mappers needs
// one.
func (c chain) Fork() Mapper {
	forked := make(chain, len(c))
	for i, m := range c {
		f, ok := m.(Forker)
		if !ok {
			return nil
		}
		forked[i] = f.Fork()
	}
	return forked
}

// Fork returns a client of the same server on the same connection, with a
// stream of its own, so that its batches are in flight along with r's. Its
// Close closes only its stream.
func (r *Remote) Fork() Mapper {
	f := &Remote{conn: r.conn, kind: r.kind}
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

// forked is a fork of a Remote: it shares the connection, which its Close
// leaves open.
type forked struct{ *Remote }

// Close closes the fork's stream.
func (f forked) Close() error {
	f.closeStream()
	return nil
}

package spawn

import (
	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// container is a user-defined container of a vertex and the role it plays.
type container struct {
	role string // NUMAFLOW_UD_CONTAINER_TYPE: udsource, transformer, udf, udsink, fb-udsink, ons-udsink
	spec *config.Container
}

// roleKinds are the kinds of server a container of each role may run: their
// server-info files and sockets in the socket directory are the container's.
var roleKinds = func() map[string][]serverinfo.Kind {
	m := map[string][]serverinfo.Kind{}
	for _, k := range serverinfo.Kinds() {
		m[k.Container()] = append(m[k.Container()], k)
	}
	return m
}()

// containersOf lists the user-defined containers of a vertex with source, udf
// and sink (each may be nil).
func containersOf(src *config.Source, u *config.UDF, snk *config.Sink) []container {
	var out []container
	if src != nil && src.UDSource != nil {
		out = append(out, container{"udsource", src.UDSource.Container})
	}
	if src != nil && src.Transformer != nil && src.Transformer.Container != nil {
		out = append(out, container{"transformer", src.Transformer.Container})
	}
	if u != nil && u.Container != nil {
		out = append(out, container{"udf", u.Container})
	}
	if snk != nil && snk.UDSink != nil {
		out = append(out, container{"udsink", snk.UDSink.Container})
	}
	if snk != nil && snk.Fallback != nil && snk.Fallback.UDSink != nil {
		out = append(out, container{"fb-udsink", snk.Fallback.UDSink.Container})
	}
	if snk != nil && snk.OnSuccess != nil && snk.OnSuccess.UDSink != nil {
		out = append(out, container{"ons-udsink", snk.OnSuccess.UDSink.Container})
	}
	return out
}

// sideInputContainer is the container of a pipeline's side input.
func sideInputContainer(si config.SideInput) container {
	return container{"sideinput", si.Container}
}

// image reports whether c has an image and no command: an engine runs it.
func (c container) image() bool { return len(c.spec.Command) == 0 }

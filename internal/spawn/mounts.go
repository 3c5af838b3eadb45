package spawn

import (
	"bytes"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
)

// namespaceMounts are a container's mounts: its vertex's socket directory
// over /var/run/numaflow and the side inputs' directory over
// /var/numaflow/side-inputs, where numaflow-go's servers look for them.
func namespaceMounts(socketDir, sideInputsDir string) []mount {
	m := []mount{{Source: socketDir, Target: serverinfo.DefaultDir}}
	if sideInputsDir != "" {
		m = append(m, mount{Source: sideInputsDir, Target: sideinputs.DefaultDir})
	}
	return m
}

// firstLineOf is the first line of out, trimmed.
func firstLineOf(out []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	return string(line)
}

package vertexconfig

import (
	"fmt"
	"strconv"
)

// Variables of the environment Numaflow's controller gives the numa
// container of a pod, beside [EnvMonoVertexObject].
const (
	// EnvVertexObject is set instead of EnvMonoVertexObject in the pods of a
	// pipeline's vertices.
	EnvVertexObject = "NUMAFLOW_VERTEX_OBJECT"
	// EnvDebug, "true", asks Numaflow's data plane for debug logs.
	EnvDebug = "NUMAFLOW_DEBUG"
	// EnvReadAhead, "true", makes a vertex read its next batch while the
	// current one is mapped and written.
	EnvReadAhead = "NUMAFLOW_READ_AHEAD"
)

// ReadAhead reads value, the value of [EnvReadAhead]: set is false when it
// is empty, and an error names the variable and the value.
func ReadAhead(value string) (on, set bool, err error) {
	if value == "" {
		return false, false, nil
	}
	if on, err = strconv.ParseBool(value); err != nil {
		return false, false, fmt.Errorf("%s (%q): want true or false", EnvReadAhead, value)
	}
	return on, true, nil
}

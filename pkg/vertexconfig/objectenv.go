package vertexconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/sluiceflow/sluice/config"
)

// EnvMonoVertexObject is the variable in which Numaflow's controller hands the
// pods of a MonoVertex their MonoVertex: standard base64 of its JSON.
const EnvMonoVertexObject = "NUMAFLOW_MONO_VERTEX_OBJECT"

// ParseMonoVertexEnv decodes and validates value, the value of
// [EnvMonoVertexObject]: standard base64, whitespace around it aside, of a
// MonoVertex as [ParseMonoVertexObject] reads it, validated whole.
//
// Every error names the variable, and the decoding error or the [*config.Error] it
// wraps: the value quoted, cut to its first 40 bytes, when it is not base64;
// the decoded value so quoted when it is not a MonoVertex at all (not JSON,
// not an object); every problem otherwise.
//
//	NUMAFLOW_MONO_VERTEX_OBJECT ("not base64!") is not standard base64: illegal base64 data at input byte 3
//	NUMAFLOW_MONO_VERTEX_OBJECT ("\"gen\"") is not a MonoVertex once base64-decoded: want a JSON object (a MonoVertex), got a string
//	NUMAFLOW_MONO_VERTEX_OBJECT: 2 problem(s) in the MonoVertex:
//	spec.source.generator.rpu (0) must be at least 1
//	spec.sink: is required; null sets nothing
func ParseMonoVertexEnv(value string) (*config.File, error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("%s (%s) is not standard base64: %w", EnvMonoVertexObject, abbreviate(value), err)
	}
	f, err := ParseMonoVertexObject(data)
	var ce *config.Error
	switch {
	case err == nil:
		return f, nil
	case !errors.As(err, &ce):
		return nil, fmt.Errorf("%s: %w", EnvMonoVertexObject, err)
	case len(ce.Problems) == 1 && ce.Problems[0].Path == "":
		// Problems of the object carry no line, so the error is the message.
		return nil, fmt.Errorf("%s (%s) is not a MonoVertex once base64-decoded: %w",
			EnvMonoVertexObject, abbreviate(string(data)), ce)
	}
	return nil, fmt.Errorf("%s: %d problem(s) in the MonoVertex:\n%w", EnvMonoVertexObject, len(ce.Problems), ce)
}

// abbreviate quotes s, cut to its first 40 bytes.
func abbreviate(s string) string {
	const most = 40
	if len(s) <= most {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:most])
}

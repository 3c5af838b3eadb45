package vertexconfig

import "github.com/sluiceflow/sluice/config"

// Load reads, decodes and validates the config in path: the schema's checks
// and [Check]. Every problem is reported together in a [*config.Error].
func Load(path string) (*config.File, error) { return config.Load(path, Check) }

// Parse decodes and validates a config: the schema's checks and [Check].
// Problems are reported in line order in a [*config.Error].
func Parse(data []byte) (*config.File, error) { return config.Parse(data, Check) }

// ParseMonoVertexObject decodes and validates a MonoVertex as Numaflow's
// controller hands it to its pods (see [config.ParseMonoVertexObject]), with
// [Check] too.
func ParseMonoVertexObject(data []byte) (*config.File, error) {
	return config.ParseMonoVertexObject(data, Check)
}

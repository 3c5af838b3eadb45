package sourcer

import (
	"os"
	"strconv"

	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// DefaultPartitions is the partition list of a source that is not
// partitioned: one partition per replica, numbered by the replica's index,
// which the runtime passes in NUMAFLOW_REPLICA (0 when unset or not a
// number).
func DefaultPartitions() []int32 {
	replica, err := strconv.ParseInt(os.Getenv(serverinfo.EnvReplica), 10, 32)
	if err != nil {
		replica = 0
	}
	return []int32{int32(replica)}
}

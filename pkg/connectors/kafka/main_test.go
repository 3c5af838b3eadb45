package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests when a source, a sink or a cluster leaves a
// goroutine running after its Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

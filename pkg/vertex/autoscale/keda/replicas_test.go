package keda

import "testing"

func TestPendingOf(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       float64
	}{
		{"none", "# TYPE x gauge\nx 3\n", -1},
		{"unknown", "sluice_source_pending -1\n", -1},
		{"plain", "# HELP sluice_source_pending ...\nsluice_source_pending 42\n", 42},
		{"labels", `sluice_source_pending{partition="0"} 5` + "\n" + `sluice_source_pending{partition="1"} 7 1700000000` + "\n", 12},
		{"prefix only", "sluice_source_pending_total 9\n", -1},
		{"garbage", "sluice_source_pending abc\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pendingOf(tc.text); got != tc.want {
				t.Fatalf("pendingOf = %v, want %v", got, tc.want)
			}
		})
	}
}

package vertex_test

import (
	"testing"

	"github.com/sluiceflow/sluice/pkg/vertex"
)

func TestRegionShareSumsToTotal(t *testing.T) {
	for _, tt := range []struct {
		total   int64
		weights map[string]int
		want    map[string]int64
	}{
		{100, map[string]int{"eu": 1, "us": 1}, map[string]int64{"eu": 50, "us": 50}},
		{10, map[string]int{"eu": 1, "us": 1, "ap": 1}, map[string]int64{"ap": 4, "eu": 3, "us": 3}},
		{10, map[string]int{"eu": 200, "ap": 1}, map[string]int64{"eu": 10, "ap": 0}},
		{1000, map[string]int{"eu": 60, "us": 30, "ap": 10}, map[string]int64{"eu": 600, "us": 300, "ap": 100}},
		{1_000_000_000_000, map[string]int{"a": 1 << 30, "b": 3}, map[string]int64{"a": 999_999_997_206, "b": 2_794}},
	} {
		sum := int64(0)
		for r, want := range tt.want {
			got := vertex.RegionShare(tt.total, tt.weights, r)
			sum += got
			if got != want {
				t.Errorf("RegionShare(%d, %v, %s) = %d; want %d", tt.total, tt.weights, r, got, want)
			}
		}
		if sum != tt.total {
			t.Errorf("parts of %d by %v sum to %d", tt.total, tt.weights, sum)
		}
	}
	if got := vertex.RegionShare(10, map[string]int{"eu": 1}, "us"); got != 0 {
		t.Errorf("a region without a weight gets %d", got)
	}
}

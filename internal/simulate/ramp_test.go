package simulate

import (
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// FuzzRamp checks the mode arithmetic on random configs and demand: the pool is
// always within [min, max], no epoch grants more than floor(P), and a call is
// granted min(demand, floor(P)).
func FuzzRamp(f *testing.F) {
	f.Add(int64(110), int64(10), uint16(10), uint8(3), uint8(100), uint8(0), uint8(50), []byte{10, 20, 255, 60, 0, 200})
	f.Add(int64(1), int64(0), uint16(0), uint8(0), uint8(50), uint8(5), uint8(50), []byte{1, 1, 1})
	f.Add(int64(ratelimit.MaxTokens), int64(1), uint16(1), uint8(2), uint8(0), uint8(1), uint8(100), []byte{255, 255, 9})
	f.Fuzz(func(t *testing.T, maxT, minT int64, rampS uint16, mode, threshold, coolS, rampDown uint8, demand []byte) {
		if maxT < 1 || maxT > ratelimit.MaxTokens || minT < 0 || minT > maxT || len(demand) > 200 {
			t.Skip()
		}
		cfg := ratelimit.Config{Max: maxT, Min: minT, RampUpDuration: time.Duration(rampS) * time.Second,
			Mode: ratelimit.Mode(mode % 4), ThresholdPercentage: int(threshold) % 101,
			CoolDownPeriod: time.Duration(coolS%30) * time.Second, RampDownPercentage: int(rampDown) % 101}
		d := make([]int, len(demand))
		for i, b := range demand {
			d[i] = NoCall
			if b != 255 {
				d[i] = int(b) * int(1+maxT/200)
			}
		}
		got, err := Simulate(cfg, Scenario{Demand: d})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range got {
			if !e.Called && cfg.Mode != ratelimit.Scheduled {
				continue
			}
			if e.PoolMilli < minT*1000 || e.PoolMilli > maxT*1000 {
				t.Fatalf("epoch %d: pool %d outside [%d, %d] 1000-tokens", e.Epoch, e.PoolMilli, minT*1000, maxT*1000)
			}
			if e.Called && e.Granted != min(d[i], int(e.PoolMilli/1000)) {
				t.Fatalf("epoch %d: granted %d of demand %d with pool %d", e.Epoch, e.Granted, d[i], e.PoolMilli)
			}
		}
	})
}

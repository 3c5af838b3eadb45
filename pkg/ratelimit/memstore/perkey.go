package memstore

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

var _ share.KeyStore = (*Store)(nil)

// TakeKeys implements [share.KeyStore]: several KeyLimiters in one
// process share their per-key counts through the store, in the epochs of its
// clock. Only the current epoch's counts are kept.
func (s *Store) TakeKeys(ctx context.Context, max int64, reqs []ratelimit.KeyRequest, granted []int) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return time.Time{}, ErrUnavailable
	}
	s.keyCalls++
	now := s.clk.Now()
	if e := now.Unix(); e != s.keyEpoch || s.keyCounts == nil {
		s.keyEpoch, s.keyCounts = e, map[string]int64{}
	}
	for i, r := range reqs {
		g := min(int64(r.Want), max-s.keyCounts[r.Key])
		if g < 0 {
			g = 0
		}
		s.keyCounts[r.Key] += g
		granted[i] = int(g)
	}
	return now, nil
}

// KeyCalls returns the number of TakeKeys calls the store has answered.
func (s *Store) KeyCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyCalls
}

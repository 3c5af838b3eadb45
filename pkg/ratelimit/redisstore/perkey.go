package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

var (
	//go:embed perkey.lua
	perKeySource string
	perKeyScript = redis.NewScript(perKeySource)
)

// KeyLinger is how long the counts of one epoch of per-key limits outlive
// the epoch; then Redis deletes them.
const KeyLinger = 2 * time.Second

var _ share.KeyStore = (*Store)(nil)

// KeyPrefix returns the base name of the store's per-key counts: the count of
// message key k is the string KeyPrefix():k, which holds "<epoch>:<tokens>"
// for the epoch of its last grant and expires KeyLinger after that epoch ends.
// It has the store's hash tag, so that the counts of a batch, whatever their
// message keys, are in one Redis Cluster slot.
func (s *Store) KeyPrefix() string { return s.keyBase }

// KeyName returns the name of the count of message key k.
func (s *Store) KeyName(k string) string { return s.keyBase + ":" + k }

// TakeKeys implements [share.KeyStore] with one run of a script
// (perkey.lua, EVALSHA), whatever the number of keys: it takes up to Want
// tokens of each key in the epoch of Redis TIME, never more than max per key
// per epoch over every replica, and returns Redis's time.
func (s *Store) TakeKeys(ctx context.Context, max int64, reqs []ratelimit.KeyRequest, granted []int) (time.Time, error) {
	keys := make([]string, len(reqs))
	args := make([]any, 0, 2+len(reqs))
	args = append(args, max, KeyLinger.Milliseconds())
	for i, r := range reqs {
		keys[i] = s.KeyName(r.Key)
		args = append(args, r.Want)
	}
	res, err := perKeyScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: per-key take: %w", err)
	}
	if len(res) != 2+len(reqs) {
		return time.Time{}, fmt.Errorf("redisstore: per-key take: %d values from the script, want %d", len(res), 2+len(reqs))
	}
	for i := range reqs {
		granted[i] = int(res[2+i])
	}
	return time.Unix(res[0], res[1]*int64(time.Microsecond)), nil
}

package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OwnPending reports that Pending counts the partitions this source owns,
// not the whole group's: each replica of a vertex tells its part, and
// [Source.GroupPending] the whole.
func (s *Source) OwnPending() bool { return true }

// Pending returns the consumer lag over the partitions this source owns now:
// for each, its high watermark less its committed offset, or less where
// reading starts (auto.offset.reset) when the group committed none. It costs
// two requests (three when a partition has no commit and reading starts at
// the earliest offset). On error it returns -1.
func (s *Source) Pending(ctx context.Context) (int64, error) {
	owned := s.owned()
	if len(owned) == 0 {
		return 0, nil
	}
	return s.lag(ctx, owned)
}

// GroupPending returns the consumer lag over every partition of the
// source's topics, whoever owns them: the group's, as Numaflow's Kafka
// source reports its pending count. It costs what Pending does. On error it
// returns -1.
func (s *Source) GroupPending(ctx context.Context) (int64, error) {
	return s.lag(ctx, nil)
}

// lag sums the lag of the partitions parts names, by topic; every partition
// of the source's topics when parts is nil.
func (s *Source) lag(ctx context.Context, parts map[string][]int32) (int64, error) {
	topics := slices.Clone(s.cfg.Topics)
	if parts != nil {
		topics = topics[:0]
		for t := range parts {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	ends, err := s.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return -1, fmt.Errorf("kafka source: pending: listing end offsets: %w", err)
	}
	if parts == nil {
		parts = map[string][]int32{}
		ends.Each(func(o kadm.ListedOffset) { parts[o.Topic] = append(parts[o.Topic], o.Partition) })
	}
	committed, err := s.adm.FetchOffsets(ctx, s.cfg.Group)
	if err != nil {
		return -1, fmt.Errorf("kafka source: pending: fetching the committed offsets of group %q: %w", s.cfg.Group, err)
	}
	var starts kadm.ListedOffsets
	var total int64
	for _, t := range topics {
		for _, n := range parts[t] {
			end, ok := ends.Lookup(t, n)
			if err := offsetErr(ok, end.Err); err != nil {
				return -1, fmt.Errorf("kafka source: pending: end offset of %s[%d]: %w", t, n, err)
			}
			at := int64(-1)
			if c, ok := committed.Lookup(t, n); ok && c.Err == nil {
				at = c.At
			}
			if at < 0 {
				if at, err = s.startOffset(ctx, &starts, topics, t, n, end.Offset); err != nil {
					return -1, err
				}
			}
			total += max(0, end.Offset-at)
		}
	}
	return total, nil
}

// startOffset is where reading a partition without a commit starts: its log
// start offset for earliest (listed once, into starts), its end for latest.
func (s *Source) startOffset(ctx context.Context, starts *kadm.ListedOffsets, topics []string, t string, n int32, end int64) (int64, error) {
	if s.reset == "latest" {
		return end, nil
	}
	if *starts == nil {
		var err error
		if *starts, err = s.adm.ListStartOffsets(ctx, topics...); err != nil {
			return -1, fmt.Errorf("kafka source: pending: listing start offsets: %w", err)
		}
	}
	start, ok := starts.Lookup(t, n)
	if err := offsetErr(ok, start.Err); err != nil {
		return -1, fmt.Errorf("kafka source: pending: start offset of %s[%d]: %w", t, n, err)
	}
	return start.Offset, nil
}

// offsetErr is the error of a listed offset: err, or that it is missing.
func offsetErr(listed bool, err error) error {
	if !listed {
		return errors.New("not listed")
	}
	return err
}

// owned returns the partitions this source owns, by topic.
func (s *Source) owned() map[string][]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]int32{}
	for k, p := range s.parts {
		if !p.revoking {
			out[k.topic] = append(out[k.topic], k.partition)
		}
	}
	return out
}

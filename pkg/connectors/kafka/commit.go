package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// commitTimeout bounds the commits of a revoke and of Close.
const commitTimeout = 10 * time.Second

// Ack acks messages returned by Read. A partition's offset is committed, in
// the background, up to its lowest offset read and not acked. Acks of
// messages whose partition was revoked since they were read are ignored:
// the new owner reads them again. Ack returns an error for a message that
// this source did not read; it still acks the others.
func (s *Source) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	var p *partition
	var bad error
	moved := false
	for i := range msgs {
		r, ok := msgs[i].Handle.(*kgo.Record)
		if !ok {
			bad = fmt.Errorf("kafka source: ack of message %q, which this source did not read", msgs[i].ID)
			continue
		}
		if p == nil || p.key.partition != r.Partition || p.key.topic != r.Topic {
			p = s.parts[partKey{r.Topic, r.Partition}]
		}
		if p == nil || !p.ack(r) {
			continue
		}
		if !p.dirty && p.commitPoint().Offset > p.committed {
			p.dirty = true
			s.dirty = append(s.dirty, p)
			moved = true
		}
	}
	s.mu.Unlock()
	if moved {
		select {
		case s.commitSig <- struct{}{}:
		default:
		}
	}
	return bad
}

// commitLoop commits the offsets that acks moved, one commit at a time (acks
// that come during a commit go in the next), until Close. A failed commit is
// tried again after a pause.
func (s *Source) commitLoop() {
	defer s.wg.Done()
	var retry <-chan time.Time
	backoff := time.Duration(0)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.commitSig:
		case <-retry:
		}
		if s.every > 0 && !sleep(s.ctx, s.every) {
			return
		}
		retry = nil
		if err := s.commitDirty(s.ctx); err != nil {
			if s.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			s.log.Warn("kafka offset commit failed; retrying", zap.Duration("in", backoff), zap.Error(err))
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}

// commitDirty commits the partitions whose commit point moved.
func (s *Source) commitDirty(ctx context.Context) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	parts := s.dirty
	s.dirty = nil
	offsets := collect(parts)
	s.mu.Unlock()
	return s.commit(ctx, offsets, parts)
}

// commitAll commits every owned partition whose commit point is past its
// last commit.
func (s *Source) commitAll(ctx context.Context) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	parts := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, p)
	}
	s.dirty = nil
	offsets := collect(parts)
	s.mu.Unlock()
	return s.commit(ctx, offsets, parts)
}

// collect returns the commit points of parts that are past their last
// commit, and marks parts clean. Source.mu is held.
func collect(parts []*partition) map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range parts {
		p.dirty = false
		at := p.commitPoint()
		if p.gone || at.Offset <= p.committed {
			continue
		}
		if offsets[p.key.topic] == nil {
			offsets[p.key.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.key.topic][p.key.partition] = at
	}
	return offsets
}

// commit commits offsets, the commit points of parts, and records them as
// committed; on failure it marks parts dirty again. Source.commitMu is held.
func (s *Source) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, parts []*partition) error {
	if len(offsets) == 0 {
		return nil
	}
	var err error
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
		err = commitErr(resp, cerr)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		at, ok := offsets[p.key.topic][p.key.partition]
		switch {
		case !ok:
		case err == nil:
			p.committed = max(p.committed, at.Offset)
		case !p.gone && !p.dirty:
			p.dirty = true
			s.dirty = append(s.dirty, p)
		}
	}
	return err
}

// commitErr returns the error of a commit: its request's, or the first of
// its partitions'.
func commitErr(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return fmt.Errorf("kafka source: committing offsets: %w", err)
	}
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				return fmt.Errorf("kafka source: committing the offset of %s[%d]: %w", t.Topic, p.Partition, e)
			}
		}
	}
	return nil
}

// onAssigned starts tracking the partitions assigned to this member.
func (s *Source) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range assigned {
		for _, n := range ps {
			k := partKey{t, n}
			if s.parts[k] == nil {
				s.parts[k] = newPartition(k)
			}
		}
	}
	s.log.Info("kafka partitions assigned", zap.Any("partitions", assigned))
}

// onRevoked hands partitions over: it drops their records not read, waits up
// to RevokeWait for the ones read to be acked, commits what was acked, and
// forgets the partitions. The rebalance waits for it.
func (s *Source) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	defer s.partitionsGone(revoked)
	parts, wait := s.startRevoke(revoked, s.cfg.RevokeWait > 0)
	if len(parts) == 0 {
		return
	}
	if len(wait) > 0 {
		s.waitAcks(wait)
	}
	s.commitMu.Lock()
	s.mu.Lock()
	offsets := collect(parts)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	err := s.commit(ctx, offsets, parts)
	cancel()
	s.commitMu.Unlock()
	s.forget(parts)
	if err != nil {
		s.log.Warn("kafka offset commit of revoked partitions failed; their new owner reads again from the last commit", zap.Error(err))
	}
	s.log.Info("kafka partitions revoked", zap.Any("partitions", revoked))
}

// startRevoke marks the revoked partitions, drops their records not read, and
// returns them, with (when wait) the channels closed once their records read
// are acked.
func (s *Source) startRevoke(revoked map[string][]int32, wait bool) ([]*partition, []chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []*partition
	var drained []chan struct{}
	for t, ps := range revoked {
		for _, n := range ps {
			p := s.parts[partKey{t, n}]
			if p == nil {
				continue
			}
			p.revoking = true
			s.unready(p)
			if wait && p.unacked > 0 && !s.closing {
				p.drained = make(chan struct{})
				drained = append(drained, p.drained)
			}
			parts = append(parts, p)
		}
	}
	return parts, drained
}

// waitAcks waits until every channel of wait is closed, RevokeWait passes or
// Close starts.
func (s *Source) waitAcks(wait []chan struct{}) {
	t := time.NewTimer(s.cfg.RevokeWait)
	defer t.Stop()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// unready drops p's records not read and takes p out of the read rotation.
// Source.mu is held.
func (s *Source) unready(p *partition) {
	s.unbuffer(p.dropQueued())
	if !p.inReady {
		return
	}
	p.inReady = false
	for i, q := range s.ready {
		if q == p {
			s.ready = append(s.ready[:i], s.ready[i+1:]...)
			if i < s.rr {
				s.rr--
			}
			break
		}
	}
}

// forget stops tracking parts: their acks are ignored from now on.
func (s *Source) forget(parts []*partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		p.gone = true
		if s.parts[p.key] == p {
			delete(s.parts, p.key)
		}
	}
}

// onLost forgets partitions this member lost without a chance to commit,
// such as when its session expired. Their messages not acked are read again
// by their new owner.
func (s *Source) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	defer s.partitionsGone(lost)
	parts, _ := s.startRevoke(lost, false)
	s.forget(parts)
	if len(parts) > 0 {
		s.log.Warn("kafka partitions lost; messages read from them and not acked will be read again", zap.Any("partitions", lost))
	}
}

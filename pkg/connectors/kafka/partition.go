package kafka

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

type partKey struct {
	topic     string
	partition int32
}

// partition is what a source keeps of one partition it owns: the records
// fetched and not read yet, and the records read and not acked yet, from
// which its commit point follows. Its fields are guarded by Source.mu.
type partition struct {
	key partKey

	fetchq []*kgo.Record // fetched, not read: fetchq[qhead:]
	qhead  int
	// fetched is the offset after the last record queued: a record below it
	// (a fetch repeated after a reset) was queued already and is dropped.
	fetched int64

	held    []heldRecord // read, in offset order: held[hhead:]; held[hhead] is never acked
	hhead   int
	unacked int
	// next is the commit point when nothing is held: the offset after the
	// last record read (Offset -1: none read yet).
	next kgo.EpochOffset
	// committed is the last offset committed by this source (-1: none).
	committed int64

	inReady  bool
	dirty    bool
	revoking bool          // being revoked: no more records are queued
	gone     bool          // revoked or lost: acks are ignored
	drained  chan struct{} // when revoking, closed once unacked is 0
}

type heldRecord struct {
	rec   *kgo.Record
	acked bool
}

func newPartition(k partKey) *partition {
	return &partition{key: k, fetched: -1, next: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: -1}
}

func (p *partition) queued() int { return len(p.fetchq) - p.qhead }

// queue appends the records not queued yet and returns how many.
func (p *partition) queue(recs []*kgo.Record) int {
	n := 0
	for _, r := range recs {
		if r.Offset < p.fetched {
			continue
		}
		p.fetchq = append(p.fetchq, r)
		p.fetched = r.Offset + 1
		n++
	}
	return n
}

// read moves the next queued record to held and returns it.
func (p *partition) read() *kgo.Record {
	r := p.fetchq[p.qhead]
	p.fetchq[p.qhead] = nil
	p.qhead++
	if p.qhead == len(p.fetchq) {
		p.fetchq, p.qhead = p.fetchq[:0], 0
	}
	p.held = append(p.held, heldRecord{rec: r})
	p.unacked++
	p.next = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	return r
}

// dropQueued forgets the records not read and returns how many there were.
func (p *partition) dropQueued() int {
	n := p.queued()
	clear(p.fetchq)
	p.fetchq, p.qhead = nil, 0
	return n
}

// ack marks r acked and reports whether it was held and not acked before.
// A record of an earlier assignment of the partition is not held.
func (p *partition) ack(r *kgo.Record) bool {
	held := p.held[p.hhead:]
	i := sort.Search(len(held), func(i int) bool { return held[i].rec.Offset >= r.Offset })
	if i == len(held) || held[i].rec != r || held[i].acked {
		return false
	}
	held[i].acked = true
	p.unacked--
	if i == 0 {
		p.popAcked()
	}
	if p.unacked == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	return true
}

// popAcked drops the acked records at the head of held.
func (p *partition) popAcked() {
	for p.hhead < len(p.held) && p.held[p.hhead].acked {
		p.held[p.hhead] = heldRecord{}
		p.hhead++
	}
	switch {
	case p.hhead == len(p.held):
		p.held, p.hhead = p.held[:0], 0
	case p.hhead > 1024 && p.hhead > len(p.held)/2:
		n := copy(p.held, p.held[p.hhead:])
		clear(p.held[n:])
		p.held, p.hhead = p.held[:n], 0
	}
}

// commitPoint is the offset to commit: the lowest read and not acked, else
// the one after the last read. Its Offset is -1 when nothing was read.
func (p *partition) commitPoint() kgo.EpochOffset {
	if p.hhead < len(p.held) {
		r := p.held[p.hhead].rec
		return kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
	}
	return p.next
}

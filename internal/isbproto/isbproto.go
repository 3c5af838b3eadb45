// Package isbproto converts between the user metadata and nack options of isb
// messages and their wire form, the common protos of the UDF protocol.
package isbproto

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// ToMetadata returns the wire form of user metadata, nil when there is none.
func ToMetadata(md isb.Metadata) *common.Metadata {
	if len(md) == 0 {
		return nil
	}
	groups := make(map[string]*common.KeyValueGroup, len(md))
	for name, kv := range md {
		groups[name] = &common.KeyValueGroup{KeyValue: kv}
	}
	return &common.Metadata{UserMetadata: groups}
}

// FromMetadata returns the user metadata of md, nil when there is none. The
// system metadata is the platform's own and is not kept.
func FromMetadata(md *common.Metadata) isb.Metadata {
	groups := md.GetUserMetadata()
	if len(groups) == 0 {
		return nil
	}
	out := make(isb.Metadata, len(groups))
	for name, g := range groups {
		out[name] = g.GetKeyValue()
	}
	return out
}

// FromNackOptions returns the nack options of o; o may be nil.
func FromNackOptions(o *common.NackOptions) isb.NackOptions {
	return isb.NackOptions{Reason: o.GetReason(), Delay: time.Duration(o.GetDelay()) * time.Millisecond,
		MaxDeliveries: o.GetMaxDeliveries(), Values: o.GetNackMap()}
}

// ToNackOptions returns the wire form of o, nil when no option is set.
func ToNackOptions(o isb.NackOptions) *common.NackOptions {
	var w common.NackOptions
	set := false
	if o.Reason != "" {
		w.Reason, set = &o.Reason, true
	}
	if o.Delay > 0 {
		ms := uint64(o.Delay / time.Millisecond)
		w.Delay, set = &ms, true
	}
	if o.MaxDeliveries > 0 {
		w.MaxDeliveries, set = &o.MaxDeliveries, true
	}
	if len(o.Values) > 0 {
		w.NackMap, set = o.Values, true
	}
	if !set {
		return nil
	}
	return &w
}

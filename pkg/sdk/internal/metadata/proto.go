package metadata

import (
	"maps"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
)

// empty is the metadata sent for a message without user metadata. It is
// shared by every such message, so it must never be modified.
var empty = &common.Metadata{}

// FromProto returns the user metadata of md (which may be nil) as a new
// UserMetadata that the caller owns: its groups are copies, its values'
// bytes are md's. It is never nil.
func FromProto(md *common.Metadata) *UserMetadata {
	user := md.GetUserMetadata()
	if len(user) == 0 {
		return &UserMetadata{}
	}
	out := &UserMetadata{groups: make(map[string]map[string][]byte, len(user))}
	for g, kv := range user {
		keys := maps.Clone(kv.GetKeyValue())
		if keys == nil {
			keys = map[string][]byte{}
		}
		out.groups[g] = keys
	}
	return out
}

// ToProto returns the metadata to send for a message with user metadata m:
// its groups, and no system metadata (which belongs to the runtime). Like
// numaflow-go, it always returns a Metadata, an empty one when m is nil or
// empty, which tells the runtime that the message has no user metadata. The
// result shares m's maps, and the empty one is shared by every call: it is
// for sending only, and m must not change until it is sent.
func ToProto(m *UserMetadata) *common.Metadata {
	if m.Len() == 0 {
		return empty
	}
	user := make(map[string]*common.KeyValueGroup, len(m.groups))
	for g, kv := range m.groups {
		user[g] = &common.KeyValueGroup{KeyValue: kv}
	}
	return &common.Metadata{UserMetadata: user}
}

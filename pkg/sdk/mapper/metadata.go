package mapper

import "github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"

// UserMetadata is the metadata user code attaches to a message: named
// groups of keys with values of bytes, read from the input with
// Datum.UserMetadata and set on an output with Message.WithUserMetadata.
// The runtime does not carry it from input to output by itself. The zero
// value is empty and ready to use; a nil *UserMetadata reads as empty.
type UserMetadata = metadata.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return metadata.NewUserMetadata() }

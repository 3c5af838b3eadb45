package mapper_test

import (
	"fmt"
	"testing"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func TestMessage(t *testing.T) {
	base := mapper.NewMessage([]byte("v"))
	keyed := base.WithKeys([]string{"k"})
	tagged := keyed.WithTags([]string{"t"})
	delay := uint64(100)
	opts := &mapper.NackOptions{Delay: &delay}
	cases := []struct {
		name       string
		m          mapper.Message
		want       string
		drop, nack bool
		opts       *mapper.NackOptions
	}{
		{"new", base, `"v" [] []`, false, false, nil},
		{"with keys", keyed, `"v" [k] []`, false, false, nil},
		{"with tags", tagged, `"v" [k] [t]`, false, false, nil},
		{"to drop", mapper.MessageToDrop(), `"" [] [U+005C__DROP__]`, true, false, nil},
		{"to nack", mapper.MessageToNack(opts), `"" [] [U+005C__NACK__]`, false, true, opts},
		{"to nack without options", mapper.MessageToNack(nil), `"" [] [U+005C__NACK__]`, false, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprintf("%q %v %v", c.m.Value(), c.m.Keys(), c.m.Tags()); got != c.want {
				t.Errorf("message = %s, want %s", got, c.want)
			}
			if c.m.IsDrop() != c.drop || c.m.IsNack() != c.nack || c.m.NackOptions() != c.opts {
				t.Errorf("IsDrop = %v, IsNack = %v, NackOptions = %v", c.m.IsDrop(), c.m.IsNack(), c.m.NackOptions())
			}
			if c.m.UserMetadata() != nil {
				t.Errorf("user metadata %v, want none", c.m.UserMetadata())
			}
		})
	}
	if mapper.DropTag != `U+005C__DROP__` || mapper.NackTag != `U+005C__NACK__` {
		t.Error("drop or nack tag changed")
	}
}

// WithUserMetadata keeps a copy: the message does not change with md.
func TestMessageUserMetadata(t *testing.T) {
	md := mapper.NewUserMetadata()
	md.AddKV("g", "k", []byte("v"))
	m := mapper.NewMessage([]byte("x")).WithUserMetadata(md)
	md.AddKV("g", "k", []byte("changed"))
	md.AddKV("other", "k", nil)
	if got := m.UserMetadata().String(); got != `g{k="v"}` {
		t.Errorf("message metadata %s, want g{k=\"v\"}", got)
	}
	if m.WithUserMetadata(nil).UserMetadata() != nil {
		t.Error("WithUserMetadata(nil) must clear it")
	}
}

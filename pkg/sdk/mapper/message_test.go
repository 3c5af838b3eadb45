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
	cases := []struct {
		name string
		m    mapper.Message
		want string
		drop bool
	}{
		{"new", base, `"v" [] []`, false},
		{"with keys", keyed, `"v" [k] []`, false},
		{"with tags", tagged, `"v" [k] [t]`, false},
		{"to drop", mapper.MessageToDrop(), `"" [] [U+005C__DROP__]`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprintf("%q %v %v", c.m.Value(), c.m.Keys(), c.m.Tags()); got != c.want {
				t.Errorf("message = %s, want %s", got, c.want)
			}
			if c.m.IsDrop() != c.drop {
				t.Errorf("IsDrop = %v", c.m.IsDrop())
			}
		})
	}
	if mapper.DropTag != `U+005C__DROP__` {
		t.Error("drop tag changed")
	}
}

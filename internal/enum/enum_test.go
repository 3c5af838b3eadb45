package enum

import "testing"

type color uint8

var colorNames = []string{"", "red", "green", "blue"}

func TestEnum(t *testing.T) {
	var c color
	if err := Parse(&c, colorNames, []byte("green"), "color"); err != nil || c != 2 {
		t.Fatalf("green: %v, %v", c, err)
	}
	for _, text := range []string{"", "Green", "purple"} {
		if err := Parse(&c, colorNames, []byte(text), "color"); err == nil ||
			err.Error() != `unknown color "`+text+`" (want red, green or blue)` {
			t.Fatalf("%q: %v", text, err)
		}
	}
	if n := Name(colorNames, color(3), "color"); n != "blue" {
		t.Fatal(n)
	}
	if n := Name(colorNames, color(9), "color"); n != "color(9)" {
		t.Fatal(n)
	}
	if b, err := Marshal(colorNames, color(1), "color"); string(b) != "red" || err != nil {
		t.Fatal(string(b), err)
	}
	if _, err := Marshal(colorNames, color(4), "color"); err == nil {
		t.Fatal("a value without a name marshals")
	}
	if w := want([]string{"a", "b"}); w != "a or b" {
		t.Fatal(w)
	}
}

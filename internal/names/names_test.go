package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestShorten(t *testing.T) {
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		name, in string
		max      int
		same     bool
	}{
		{name: "fits", in: "foo.example.com-view", max: 253, same: true},
		{name: "exactly max", in: strings.Repeat("b", 253), max: 253, same: true},
		{name: "too long", in: long, max: 253},
		{name: "too long with trailing dot at cut", in: strings.Repeat("a", 241) + "." + strings.Repeat("c", 20), max: 253},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Shorten(tc.in, tc.max)
			if len(got) > tc.max {
				t.Fatalf("len(Shorten) = %d > %d", len(got), tc.max)
			}
			if tc.same && got != tc.in {
				t.Fatalf("Shorten changed a name that fits: %q", got)
			}
			if !tc.same {
				if got == tc.in {
					t.Fatalf("Shorten did not shorten")
				}
				if again := Shorten(tc.in, tc.max); again != got {
					t.Fatalf("not deterministic: %q vs %q", got, again)
				}
				if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
					t.Fatalf("shortened name %q is not a DNS subdomain: %v", got, errs)
				}
			}
		})
	}
	if Shorten(long, 253) == Shorten(long+"x", 253) {
		t.Fatal("distinct long names collided")
	}
}

func TestHashSeparatesParts(t *testing.T) {
	if Hash("a-b", "c") == Hash("a", "b-c") {
		t.Fatal("Hash must separate its parts")
	}
	if Hash("x") != Hash("x") {
		t.Fatal("Hash must be deterministic")
	}
}

func TestLabelValue(t *testing.T) {
	for _, in := range []string{
		"argocd",
		strings.Repeat("e", 63),
		strings.Repeat("e", 64),
		strings.Repeat("x.", 120),
		"-leading-and-trailing-" + strings.Repeat("z", 60) + "-",
		"....",
	} {
		got := LabelValue(in)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q is not a label value: %v", in, got, errs)
		}
		if len(validation.IsValidLabelValue(in)) == 0 && got != in {
			t.Errorf("LabelValue changed a valid value %q to %q", in, got)
		}
	}
	if LabelValue(strings.Repeat("e", 64)) == LabelValue(strings.Repeat("e", 65)) {
		t.Fatal("distinct long values collided")
	}
}

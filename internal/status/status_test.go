package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnumerate(t *testing.T) {
	assert.Equal(t, "", Enumerate(nil, 3))
	assert.Equal(t, "a, b", Enumerate([]string{"a", "b"}, 3))
	assert.Equal(t, "a, b and 2 more", Enumerate([]string{"a", "b", "c", "d"}, 2))
}

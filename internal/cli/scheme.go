package cli

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/operator-framework/oria/internal/scheme"
)

// Scheme returns the plugin's scheme (package scheme, the manager's too,
// without linking the manager).
func Scheme() (*runtime.Scheme, error) { return scheme.New() }

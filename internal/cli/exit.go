package cli

import (
	"errors"
	"fmt"
)

// Exit codes of kubectl-oria, for scripts and CI:
//   - ExitOK: the command ran and the answer is yes (plan: every object
//     admitted; check: nothing failed);
//   - ExitError: the command could not run (a bad flag, an unreadable file,
//     a cluster it could not reach or read);
//   - ExitNo: the command ran and the answer is no (plan: an object is
//     REFUSED; grant: the guard refused the policy, nothing was created;
//     check: a check failed). The report is printed in full first.
const (
	ExitOK    = 0
	ExitError = 1
	ExitNo    = 2
)

// NoError is the error of a command whose answer is no: its report was
// printed, and the plugin exits with ExitNo.
type NoError struct{ Message string }

func (e *NoError) Error() string { return e.Message }

// answerNo returns a NoError with the message.
func answerNo(format string, args ...any) error {
	return &NoError{Message: fmt.Sprintf(format, args...)}
}

// ExitCode is the exit code of a command that returned err.
func ExitCode(err error) int {
	var no *NoError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &no):
		return ExitNo
	default:
		return ExitError
	}
}

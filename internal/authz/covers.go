package authz

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
)

// coversMemo remembers rbacvalidation.Covers's answers across requests. A
// delegated user repeating writes asks the same question each time (do my
// rules in these namespaces cover the roles I bind?), and comparing a
// namespace admin's rules with edit's breaks both into some 400
// permissions each: in the guard benchmark it was the largest part of the
// guard's own CPU once the rules came from memory. Answers are keyed by the
// digests of both rule lists, so a role or binding that changes is a new
// question, never a stale answer; the memo is emptied when full.
type coversMemo struct {
	mu      sync.Mutex
	answers map[[2]digest]bool
}

// digest identifies a list of rules by its contents.
type digest [sha256.Size]byte

// maxCoverAnswers bounds the memo: a few distinct holdings times the roles
// they bind.
const maxCoverAnswers = 1024

func digestOf(rules []rbacv1.PolicyRule) digest {
	b, _ := json.Marshal(rules)
	return sha256.Sum256(b)
}

// covers answers whether have covers granted (rbacvalidation.Covers); haveDigest is
// digestOf(have), which the caller computes once per rule list.
func (m *coversMemo) covers(haveDigest digest, have, granted []rbacv1.PolicyRule) bool {
	k := [2]digest{haveDigest, digestOf(granted)}
	m.mu.Lock()
	covered, ok := m.answers[k]
	m.mu.Unlock()
	if ok {
		return covered
	}
	covered, _ = rbacvalidation.Covers(have, granted)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil || len(m.answers) >= maxCoverAnswers {
		m.answers = make(map[[2]digest]bool)
	}
	m.answers[k] = covered
	return covered
}

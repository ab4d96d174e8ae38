package broker

import (
	"strings"
	"sync"

	"github.com/awf-project/awf/proto"
)

// Ledger holds the per-repository bit budgets of one run. Charges are never
// refunded and the balance is never disclosed to a caller.
type Ledger struct {
	mu      sync.Mutex
	balance map[string]*int64 // nil = unmetered
}

// NewLedger returns a ledger funded from each repository's sensitivity. Keys
// are lower-cased slugs. An unknown sensitivity funds nothing.
func NewLedger(sensitivity map[string]string) *Ledger {
	l := &Ledger{balance: map[string]*int64{}}
	for repo, s := range sensitivity {
		bits, metered, ok := proto.SensitivityBudget(s)
		if !ok {
			bits, metered = 0, true
		}
		if !metered {
			l.balance[strings.ToLower(repo)] = nil
			continue
		}
		b := bits
		l.balance[strings.ToLower(repo)] = &b
	}
	return l
}

// TryDebit takes bits from repo's budget. It returns false, and changes
// nothing, for an unknown repo, a negative charge, or a charge larger than
// the balance. An unmetered repo always succeeds and is never debited.
func (l *Ledger) TryDebit(repo string, bits int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	bal, ok := l.balance[strings.ToLower(repo)]
	switch {
	case !ok || bits < 0:
		return false
	case bal == nil:
		return true
	case bits > *bal:
		return false
	}
	*bal -= bits
	return true
}

// Balance returns repo's remaining bits (-1 when unmetered, 0 when unknown).
// It is for the operator and tests only; the broker never sends it.
func (l *Ledger) Balance(repo string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	bal, ok := l.balance[strings.ToLower(repo)]
	switch {
	case !ok:
		return 0
	case bal == nil:
		return -1
	}
	return *bal
}

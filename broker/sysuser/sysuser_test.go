package sysuser

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("awf-no-such-user")
	require.ErrorIs(t, err, ErrUnknown)
}

func TestLookupRoot(t *testing.T) {
	ids, err := Lookup("root")
	require.NoError(t, err)
	assert.Equal(t, IDs{}, ids)
}

// TestEnsureAndRemove makes a throwaway user from several goroutines at
// once, as concurrent awf runs would, and removes it.
func TestEnsureAndRemove(t *testing.T) {
	require.Zero(t, os.Geteuid(), "useradd needs root: run the tests as root, as CI does")
	name := fmt.Sprintf("awf-sut-%d", os.Getpid()%100000)
	ctx := context.Background()
	t.Cleanup(func() {
		if _, err := Lookup(name); err == nil {
			_ = Remove(ctx, name)
		}
	})
	var wg sync.WaitGroup
	got := make([]IDs, 4)
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = Ensure(ctx, name)
		}()
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, got[0], got[i], "one user for every caller")
	}
	assert.NotZero(t, got[0].UID)
	u, err := user.Lookup(name)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(got[0].UID), u.Uid)
	assert.Equal(t, "/nonexistent", u.HomeDir)
	g, err := user.LookupGroupId(u.Gid)
	require.NoError(t, err)
	assert.Equal(t, name, g.Name, "a group of its own")
	_, err = os.Stat("/nonexistent")
	assert.True(t, os.IsNotExist(err), "no home directory was made")

	require.NoError(t, Remove(ctx, name))
	_, err = Lookup(name)
	require.ErrorIs(t, err, ErrUnknown)
	_, err = user.LookupGroup(name)
	assert.Error(t, err, "the user's group is removed with it")
	assert.Error(t, Remove(ctx, name), "removing a missing user is an error")
}

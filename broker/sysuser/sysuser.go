// Package sysuser looks up, creates and removes the system users that awf
// runs its own unprivileged processes as, with the distribution's useradd
// and userdel: one place for the flags, the deadlines and the errors.
package sysuser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// timeout bounds one useradd or userdel with the wait for its turn: they
// lock /etc/passwd and may wait for another holder.
const timeout = 30 * time.Second

// IDs are a user's uid and primary gid.
type IDs struct {
	UID, GID int
}

// ErrUnknown says that no user has the name.
var ErrUnknown = errors.New("no such user")

// Lookup returns the ids of the user called name.
func Lookup(name string) (IDs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return IDs{}, fmt.Errorf("user %s: %w", name, ErrUnknown)
		}
		return IDs{}, fmt.Errorf("user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return IDs{}, fmt.Errorf("user %s: ids %q:%q are not numbers", name, u.Uid, u.Gid)
	}
	return IDs{UID: uid, GID: gid}, nil
}

// Create adds name as a system user with a group of its own, no home
// directory and no login shell.
func Create(ctx context.Context, name string) error {
	return locked(ctx, func(ctx context.Context) error { return create(ctx, name) })
}

// create is Create under the lock.
func create(ctx context.Context, name string) error {
	out, err := exec.CommandContext(ctx, "useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create system user %s: useradd: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Ensure returns the ids of the user called name, creating it as Create
// does when it does not exist. Concurrent callers (two awf runs) get the
// same user: useradd checks that a name is free before it takes its own
// lock, so two of them for one name can both succeed, the later one
// rewriting the entry with another uid after the first caller read it.
// The check and the useradd therefore run under lockPath.
func Ensure(ctx context.Context, name string) (IDs, error) {
	ids, err := Lookup(name)
	if !errors.Is(err, ErrUnknown) {
		return ids, err
	}
	err = locked(ctx, func(ctx context.Context) error {
		if _, err := Lookup(name); !errors.Is(err, ErrUnknown) {
			return err // made while this call waited, or unreadable
		}
		return create(ctx, name)
	})
	if err != nil {
		return IDs{}, err
	}
	return Lookup(name)
}

// Remove deletes the user called name (and the group useradd made for it).
// ctx may already be done (a cleanup): it runs under its own deadline.
func Remove(ctx context.Context, name string) error {
	return locked(context.WithoutCancel(ctx), func(ctx context.Context) error {
		if out, err := exec.CommandContext(ctx, "userdel", name).CombinedOutput(); err != nil {
			return fmt.Errorf("remove system user %s: userdel: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	})
}

// lockPath is the file that awf's useradd and userdel calls take turns on.
// It lives on /run, so a lock never outlives a boot.
const lockPath = "/run/awf-sysuser.lock"

// locked runs fn holding lockPath exclusively, both under one timeout: the
// wait for another awf's turn and the useradd or userdel itself.
func locked(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("system users: lock: %w", err)
	}
	defer f.Close()
	// flock cannot be cancelled: try it until the deadline.
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return fn(ctx)
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("system users: lock %s: %w", lockPath, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("system users: wait for %s: %w", lockPath, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Package sysuser looks up, creates and removes the system users that awf
// runs its own unprivileged processes as, with the distribution's useradd
// and userdel: one place for the flags, the deadlines and the errors.
package sysuser

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// timeout bounds one useradd or userdel: they lock /etc/passwd and may
// wait for another holder.
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create system user %s: useradd: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Ensure returns the ids of the user called name, creating it as Create
// does when it does not exist. Another process may create it at the same
// moment: then its user is the one returned.
func Ensure(ctx context.Context, name string) (IDs, error) {
	ids, err := Lookup(name)
	if !errors.Is(err, ErrUnknown) {
		return ids, err
	}
	cerr := Create(ctx, name)
	ids, err = Lookup(name)
	if err != nil {
		return ids, errors.Join(cerr, err)
	}
	return ids, nil
}

// Remove deletes the user called name (and the group useradd made for it).
// ctx may already be done (a cleanup): it runs under its own deadline.
func Remove(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "userdel", name).CombinedOutput(); err != nil {
		return fmt.Errorf("remove system user %s: userdel: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

"""Learning-rate schedulers with torch.optim.lr_scheduler's names, signatures and values:
LinearLR, StepLR, CosineAnnealingLR, LambdaLR (and their base, LRScheduler).

Use them as in PyTorch, ``scheduler.step()`` after ``optimizer.step()``::

    sched = sgrad.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for ...:
        ...; opt.step(); sched.step()

Optimizer step t (1, 2, ...) then uses the learning rate of the scheduler's epoch t - 1:
construction sets epoch 0's (LinearLR: lr * start_factor), each ``step()`` the next
one. ``get_last_lr()`` is what the next optimizer step uses.

How they drive the C optimizer: at each ``scheduler.step()`` the new rate is computed in
Python with PyTorch's own chainable formulas (reading each group's current lr, so
schedulers compose and follow manual changes as PyTorch's do, and the values are
PyTorch's bit for bit), written to ``param_groups[i]["lr"]`` and handed to the group's
C optimizer as its base rate (sg_optim_set_lr) under the constant C schedule. They do not
install a C schedule (sg_optim_set_schedule): a C schedule is a function of the
optimizer's own step count, evaluated inside sg_optim_step, so it would move the rate at
every optimizer step where PyTorch moves it at scheduler.step() (StepLR is commonly
stepped once per epoch), and its closed form rounds differently from PyTorch's recursive
one. The rate a step uses is all the C side needs: exact lazy SGD records it per step for
the rows it catches up later, and fused updates use the rate of the coming step.

A scheduler's state_dict() holds its own counters only: save and restore the optimizer's
state_dict too (it holds the current lr)."""
import math
import types
import warnings
from typing import Any, Callable, Dict, List, Sequence, Union

from . import Optimizer, _check_lr

__all__ = ["LRScheduler", "LinearLR", "StepLR", "CosineAnnealingLR", "LambdaLR"]


class LRScheduler:
    """The base of the schedulers (PyTorch's LRScheduler / _LRScheduler): sets each
    group's "initial_lr" (with last_epoch == -1; resuming with another last_epoch needs
    it present, else KeyError), keeps ``base_lrs`` and ``last_epoch`` and takes the first
    step. Subclasses define ``get_lr()``, the chainable rule from the groups' current
    rates."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1, verbose: bool = False) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an sgrad Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs: List[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._get_lr_called_within_step = False
        self._initial_step()

    def _initial_step(self) -> None:
        self._optimizer_steps_at_start = self.optimizer._step_count
        self._step_count = 0
        self.step()

    def get_lr(self) -> List[float]:
        """The rates of epoch ``last_epoch`` from the groups' current ones (the chainable
        form); called by step(). Use get_last_lr() to read the rates."""
        raise NotImplementedError

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=3)

    def get_last_lr(self) -> List[float]:
        """The rate of each group set by the last step(): what the next optimizer step
        uses (unless changed by hand since)."""
        return self._last_lr

    def print_lr(self, is_verbose: bool, group: int, lr: float) -> None:
        """Prints the rate a step set (verbose=True)."""
        if is_verbose:
            print(f"Adjusting learning rate of group {group} to {lr:.4e}.")

    def step(self) -> None:
        """Advances to the next epoch and sets every group's lr to its rate (in
        param_groups and in the C optimizer). UserWarning (as PyTorch) if the first
        step() comes before any optimizer.step(): that skips the schedule's first rate.
        ArgumentError (a ValueError) for a rate that is negative or not finite, before
        any group changes."""
        if self._step_count == 1 and \
                self.optimizer._step_count == self._optimizer_steps_at_start:
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                          "Call them in the opposite order: `optimizer.step()` before "
                          "`lr_scheduler.step()`; otherwise the first value of the learning "
                          "rate schedule is skipped.", UserWarning, stacklevel=2)
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            self.last_epoch += 1
            values = [float(v) for v in self.get_lr()]
        finally:
            self._get_lr_called_within_step = False
        for i, lr in enumerate(values):
            _check_lr(lr, f"{type(self).__name__}: param_groups[{i}]['lr']")
        for i, (group, lr) in enumerate(zip(self.optimizer.param_groups, values)):
            group["lr"] = lr
            self.print_lr(self.verbose, i, lr)
        self.optimizer._sync()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> Dict[str, Any]:
        """The scheduler's counters and settings (every attribute but the optimizer), as
        PyTorch's: restore them with load_state_dict() on a scheduler of the same kind
        over the restored optimizer."""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()
                if k != "optimizer"}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores state_dict() (the optimizer's lr comes from its own state_dict)."""
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # PyTorch's older name


class LambdaLR(LRScheduler):
    """Each group's lr = its initial lr * lr_lambda(epoch): lr_lambda a Python callable
    of the epoch (an int), or a list of them, one per group (ValueError for another
    count). The callables run in Python at each step(); state_dict() saves callable
    objects' __dict__ but not plain functions or lambdas (None in their place), as
    PyTorch."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Union[Callable[[int], float], Sequence[Callable[[int], float]]],
                 last_epoch: int = -1, verbose: bool = False) -> None:
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch, verbose)

    def state_dict(self) -> Dict[str, Any]:
        """As LRScheduler's, with "lr_lambdas": each callable object's __dict__, None for
        functions and lambdas."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores state_dict(); the callables stay this scheduler's (their saved
        __dict__ is applied to callable objects)."""
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> List[float]:
        self._warn_outside_step()
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiplies each group's lr by gamma every step_size epochs (step_size an int
    >= 1, else ValueError)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1, verbose: bool = False) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be an int >= 1, not {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self) -> List[float]:
        self._warn_outside_step()
        if (self.last_epoch == 0) or (self.last_epoch % self.step_size != 0):
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]


class LinearLR(LRScheduler):
    """Scales each group's lr by a factor going linearly from start_factor (epoch 0) to
    end_factor (epoch total_iters and after). ValueError unless 0 < start_factor <= 1,
    0 <= end_factor <= 1 and total_iters >= 1."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1,
                 verbose: bool = False) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters < 1:
            raise ValueError(f"LinearLR: total_iters must be an int >= 1, not {total_iters!r}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self) -> List[float]:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self.last_epoch > self.total_iters:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * (1. + (self.end_factor - self.start_factor) /
                (self.total_iters * self.start_factor + (self.last_epoch - 1) *
                 (self.end_factor - self.start_factor)))
                for group in self.optimizer.param_groups]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from each group's initial lr down to eta_min over T_max epochs
    (then back up, periodically: SGDR's cosine without restarts), PyTorch's recursive
    form. T_max >= 1 (else ValueError)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1, verbose: bool = False) -> None:
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be an int >= 1, not {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self) -> List[float]:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        elif self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) *
                    (1 + math.cos((self.last_epoch) * math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        elif (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) *
                    (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max)) /
                (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)) *
                (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

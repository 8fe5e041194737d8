#!/usr/bin/env python3
"""Trains a tiny CNN on an ImageFolder dataset read through a clairfs mount (docs/pytorch.md).

DATA is the clairfs mount point (mounted over the dataset, or at its own path). Before the
first epoch the script registers the DataLoader's order for every epoch with clairfs; each
epoch then prints the loss, the accuracy and where clairfs served the epoch's files from.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

try:
    import clairfs
except ImportError:  # running from a source tree: the package is next to this directory
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import clairfs


def tiny_cnn(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 -> 16
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16 -> 8
        nn.Flatten(), nn.Linear(32 * 8 * 8, classes))


def served_summary(before, after):
    """How this epoch's opens were served, from two stats snapshots."""
    opened = after["file_reads"] - before["file_reads"]
    by = {k: after["served"][k] - before["served"].get(k, 0) for k in after["served"]}
    parts = ", ".join(f"{k} {v}" for k, v in by.items() if v)
    return f"{opened} opens: {parts or 'none'}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("data", help="the clairfs mount point holding the ImageFolder tree")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.manual_seed(a.seed)  # model initialization
    dataset = datasets.ImageFolder(
        a.data, transform=transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()]))
    # The shuffle must be seeded for its order to be known ahead: give the DataLoader a generator.
    order = torch.Generator().manual_seed(a.seed)
    loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=True, generator=order,
                        num_workers=a.workers)
    entries = clairfs.register_loader(a.data, loader, epochs=a.epochs)
    plan = clairfs.plan(a.data)
    placed = ", ".join(f"{t['name']} {t['objects']}" for t in plan["tiers"])
    print(f"{len(dataset)} images, {len(dataset.classes)} classes; registered {entries} reads "
          f"over {a.epochs} epochs; files placed: {placed}, staging {plan['staging']['objects']}")

    model = tiny_cnn(len(dataset.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(a.epochs):
        before, start = clairfs.stats(a.data), time.monotonic()
        total = correct = 0
        loss_sum = 0.0
        model.train()
        for x, y in loader:
            opt.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
        after = clairfs.stats(a.data)
        print(f"epoch {epoch}: loss {loss_sum / total:.3f}, accuracy {correct / total:.2f}, "
              f"{time.monotonic() - start:.1f}s; {served_summary(before, after)}")


if __name__ == "__main__":
    main()

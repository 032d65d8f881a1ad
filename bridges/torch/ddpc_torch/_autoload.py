"""torch's `torch.backends` entry point (pyproject.toml), called at the end
of `import torch` (torch >= 2.5; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it
off). Importing this module imports the package first, which registers the
backend. When the package itself is being imported (`import ddpc_torch`
before torch), the package is only partly initialised here: it goes on
registering once torch is in, so this does nothing either way."""


def load():
    """Nothing left to do: importing this module imported ddpc_torch."""

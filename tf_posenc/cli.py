"""`python -m tf_posenc`: the word-order demo (`demo`) and the plots (`plot`)."""

import argparse
import json
import sys

from tf_posenc.encoding import CONVENTIONS


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {text!r}")
    return value


def _run_demo(args):
    from tf_posenc import demo

    results = demo.run(seed=args.seed, epochs=args.epochs, verbose=0 if args.json else 1)
    print(demo.format_table(results))
    if args.json:
        print(json.dumps(results))
    return 0 if results["saved_model_serves_same_predictions"] else 1


def _wavelength(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number greater than 1, received {text!r}") from None
    if not value > 1:
        raise argparse.ArgumentTypeError(f"expected a number greater than 1, received {text!r}")
    return int(value) if value.is_integer() else value


def _grid(text):
    """`14` (a square grid) or `16x24` (height x width)."""
    try:
        sizes = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        sizes = ()
    if len(sizes) not in (1, 2) or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"expected N or HxW with positive integers, received {text!r}")
    return sizes * 2 if len(sizes) == 1 else sizes


def _widths(text):
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) <= 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, received {text!r}")
    return widths


def _run_plot(args):
    try:
        from tf_posenc.plotting import (
            plot_axial_angles,
            plot_patch_encoding,
            plot_positional_encoding,
            plot_video_encoding,
        )

        if (args.frames or args.axial) and not args.grid:
            raise ValueError("--frames and --axial draw on a patch grid: give --grid too")
        if args.axial:
            figure = plot_axial_angles(args.axial, args.grid, max_wavelength=args.max_wavelength)
        elif args.frames:
            height, width = args.grid
            figure = plot_video_encoding((width, height), args.frames, args.d_model)
        elif args.grid:
            figure = plot_patch_encoding(
                args.grid,
                args.d_model,
                base_size=args.base_size,
                interpolation_scale=args.interpolation_scale,
            )
        else:
            figure = plot_positional_encoding(
                args.position,
                args.d_model,
                max_wavelength=args.max_wavelength,
                layout=args.layout,
                convention=args.convention,
            )
        figure.savefig(args.out, dpi=args.dpi)
    except (ImportError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m tf_posenc",
        description="Sinusoidal positional encoding for TensorFlow/Keras.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="train a tiny attention model with and without the encoding on a word-order task",
        description=(
            "Trains two tiny attention models to tell 'dog sat on couch' from 'couch sat on "
            "dog', one with PositionalEncoding and one without, prints their held-out "
            "accuracies, then exports the first as a SavedModel, reloads it and checks it "
            "serves the same predictions."
        ),
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    demo.add_argument("--epochs", type=_positive_int, default=12, help="training epochs (default: 12)")
    demo.add_argument(
        "--json", action="store_true", help="print the results as one JSON object on the last line"
    )
    demo.set_defaults(handler=_run_demo)

    plot = commands.add_parser(
        "plot",
        help="write the position x depth heatmap of the encoding to an image file",
        description="Draws the positional encoding table as a heatmap (rows: positions, "
        "columns: depths) and saves it; the file type follows the extension.",
    )
    plot.add_argument(
        "--position",
        type=_positive_int,
        default=50,
        help="number of positions, the rows of the heatmap (default: 50)",
    )
    plot.add_argument(
        "--d-model",
        type=_positive_int,
        default=512,
        help="width of the encoding, the columns of the heatmap (default: 512)",
    )
    plot.add_argument(
        "--layout",
        choices=("interleave", "concat"),
        default=None,
        help="interleave: sin on even columns, cos on odd ones, as in the paper; "
        "concat: all sines, then all cosines (default: the convention's own)",
    )
    plot.add_argument(
        "--convention",
        choices=CONVENTIONS,
        default="paper",
        help="whose table: the paper's, tensor2tensor's or fairseq's (default: paper)",
    )
    plot.add_argument(
        "--grid",
        type=_grid,
        default=None,
        help="draw the 2-D patch encoding on a patch grid instead: N (N x N) or HxW "
        "(a few columns of it; --d-model must be a multiple of 4)",
    )
    plot.add_argument(
        "--base-size", type=float, default=None, help="with --grid: diffusers' base_size (PixArt-alpha, SD3)"
    )
    plot.add_argument(
        "--interpolation-scale",
        type=float,
        default=1.0,
        help="with --grid: divides the positions (default: 1)",
    )
    plot.add_argument(
        "--frames",
        type=_positive_int,
        default=None,
        help="with --grid: draw the 3-D video encoding (CogVideoX) of FRAMES frames, frame by frame "
        "(--d-model must be a multiple of 16)",
    )
    plot.add_argument(
        "--axial",
        type=_widths,
        default=None,
        help="with --grid: draw the angles of AxialRotaryEmbedding with these band widths, e.g. 32,32",
    )
    plot.add_argument(
        "--max-wavelength",
        type=_wavelength,
        default=10000,
        help="base of the geometric progression of wavelengths (default: 10000)",
    )
    plot.add_argument(
        "--dpi",
        type=_positive_int,
        default=100,
        help="resolution of the image in dots per inch (default: 100)",
    )
    plot.add_argument(
        "--out",
        default="positional_encoding.png",
        help="where to write the image; .png, .svg or .pdf (default: positional_encoding.png)",
    )
    plot.set_defaults(handler=_run_plot)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
